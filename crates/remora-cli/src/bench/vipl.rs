//! `vipl`: VIA's VI Provider Library on Remora, each row beside its reference in the same
//! run: an 8-byte send→receive ping-pong with polling receivers beside the raw
//! shared-memory ping-pong and beside SCIF's 8-byte message, 64 KiB send/receive and
//! RDMA-write streams beside `memcpy` over the same buffers, in both of VIA2SISCI's
//! transfer modes (memory copy and DMA; copy mode's also beside the same messages handed
//! between two threads by bare shared memory), then the same between two nodes joined over TCP
//! beside raw TCP (the streams beside raw TCP moving the same 64 KiB messages into the same
//! kind of buffers). The SCI hardware figures the paper quotes in its introduction (a 4-byte
//! message in about 1.4 µs, 320 MB/s a link; not VIA2SISCI's own results, which are graphs,
//! figures 4-6, without numbers in the text) are printed for the record. Both sides are
//! threads of this process, each with a NIC of its own node.
//!
//! Every message carries bytes its receive buffer did not hold before (three sources
//! rotate over the receive slots), so no path can skip unchanged data.

use super::common::*;
use remora_vipl::layout::control;
use remora_vipl::{
    DataSegment, Descriptor, Error, MemAttributes, MemHandle, NetAddress, Nic, UserRegion, Vi, ViAttributes,
    ViState, ViplTransfer, RELIABLE_DELIVERY,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

mod reference;
mod starved;

use reference::*;

const KIB64: usize = 64 << 10;
/// Receives kept posted on each side.
const DEPTH: usize = 64;
/// Send sources (after the receive slots), rotated so each receive slot changes.
const SOURCES: usize = 3;
/// Messages of a 64 KiB stream across hosts.
const FAR_STREAM: usize = 256;

/// One side: its NIC and VI, descriptors, and a buffer, all registered. Aligned to lines
/// of its own: the two sides are used by two threads, as the raw reference's two words lie
/// on lines of their own.
#[repr(align(128))]
struct Side {
    nic: Nic,
    vi: Vi,
    desc: UserRegion,
    dh: MemHandle,
    buf: UserRegion,
    bh: MemHandle,
    /// Sends posted so far (picks the source).
    sent: AtomicUsize,
    /// Wait in `recv_wait` (spin, then sleep) rather than poll: two "hosts" on two cores.
    blocking: bool,
}

fn leak(len: usize) -> UserRegion {
    let m: &'static mut [u8] = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
    let skip = (4096 - m.as_ptr() as usize % 4096) % 4096;
    UserRegion::from_static(&mut m[skip..skip + len])
}

impl Side {
    fn new(nic: Nic, blocking: bool) -> Result<Side, String> {
        let ptag = nic.create_ptag();
        let attrs = ViAttributes {
            reliability: RELIABLE_DELIVERY,
            max_transfer: 1 << 20,
            ptag,
            rdma_write: true,
            rdma_read: true,
        };
        let vi = Vi::create(&nic, attrs, None, None).map_err(e)?;
        let (desc, buf) = (leak((DEPTH + SOURCES) * 64), leak((DEPTH + SOURCES) * KIB64));
        for s in 0..SOURCES {
            buf.write((DEPTH + s) * KIB64, &vec![0x11 * (s as u8 + 1); KIB64]).map_err(e)?;
        }
        let m = MemAttributes { ptag, rdma_write: true, rdma_read: true };
        let dh = nic.register(desc, m).map_err(e)?;
        let bh = nic.register(buf, m).map_err(e)?;
        Ok(Side { nic, vi, desc, dh, buf, bh, sent: AtomicUsize::new(0), blocking })
    }

    fn d(&self, i: usize) -> usize {
        self.desc.addr() + i * 64
    }

    fn seg(&self, slot: usize, len: usize) -> DataSegment {
        DataSegment { addr: (self.buf.addr() + slot * KIB64) as u64, handle: self.bh, len: len as u32 }
    }

    /// Build receive `i` (buffer slot `i`, 64 KiB) and post it.
    fn post_recv(&self, i: usize) -> Result<(), String> {
        let d = Descriptor { length: KIB64 as u32, segments: vec![self.seg(i, KIB64)], ..Default::default() };
        self.nic.write_descriptor(self.d(i), self.dh, &d).map_err(e)?;
        self.vi.post_recv(self.d(i), self.dh).map_err(e)
    }

    /// Post the completed receive at `addr` again as it is, as VIA programs do.
    fn repost(&self, addr: usize) -> Result<(), String> {
        self.vi.post_recv(addr, self.dh).map_err(e)
    }

    /// Write the send descriptors (one per source) of `len` bytes, as RDMA writes with
    /// immediate data into `remote` when given.
    fn prepare_send(&self, len: usize, remote: Option<DataSegment>) -> Result<(), String> {
        for s in 0..SOURCES {
            let (control, segs) = match remote {
                Some(r) => (control::OP_RDMAWRITE | control::IMMEDIATE, vec![r, self.seg(DEPTH + s, len)]),
                None => (0, vec![self.seg(DEPTH + s, len)]),
            };
            let d = Descriptor { control, length: len as u32, segments: segs, ..Default::default() };
            self.nic.write_descriptor(self.d(DEPTH + s), self.dh, &d).map_err(e)?;
        }
        Ok(())
    }

    fn send(&self) -> Result<(), String> {
        // One thread sends on a side: no locked instruction for the count.
        let s = self.sent.load(Ordering::Relaxed);
        self.sent.store(s + 1, Ordering::Relaxed);
        self.vi.post_send(self.d(DEPTH + s % SOURCES), self.dh).map_err(e)?;
        self.vi.send_done().map(|_| ()).map_err(e)
    }

    /// Wait for a receive (polling, or in `recv_wait` across hosts) and post it again.
    fn recv(&self) -> Result<(), String> {
        let addr = self.take()?;
        self.repost(addr)
    }

    /// Wait for a receive (polling, or in `recv_wait` across hosts): its descriptor's
    /// address, to post again.
    fn take(&self) -> Result<usize, String> {
        if self.blocking {
            let (addr, _) = self.vi.recv_wait(Some(Duration::from_secs(10))).map_err(e)?;
            return Ok(addr);
        }
        // Polled as the references poll (raw shared memory, SCIF's receive): a tight loop,
        // no pause instruction between looks (one costs ~50 ns on this machine's cores),
        // the clock read only once a wait is long, as theirs is (a reading per message, some
        // 20-25 ns, lay between every answer sent and the next look).
        let mut since = None;
        for n in 0u64.. {
            match self.vi.recv_done() {
                Ok((addr, _)) => return Ok(addr),
                Err(Error::NotDone)
                    if n % 4096 != 4095
                        || since.get_or_insert_with(Instant::now).elapsed() < Duration::from_secs(10) => {}
                Err(x) => return Err(e(x)),
            }
        }
        Err("no receive".into())
    }
}

/// Two connected sides on the nodes of `a` and `b`.
fn pair(a: &remora_sisci::Sisci, b: &remora_sisci::Sisci, blocking: bool) -> Result<(Side, Side), String> {
    pair_with(a, b, blocking, DEPTH)
}

/// [`pair`], with `depth` receives posted on each side (at most [`DEPTH`]).
fn pair_with(
    a: &remora_sisci::Sisci,
    b: &remora_sisci::Sisci,
    blocking: bool,
    depth: usize,
) -> Result<(Side, Side), String> {
    let sa = Side::new(Nic::open_with_config("remora0", a.config().clone()).map_err(e)?, blocking)?;
    let sb = Side::new(Nic::open_with_config("remora0", b.config().clone()).map_err(e)?, blocking)?;
    for i in 0..depth.min(DEPTH) {
        sa.post_recv(i)?;
        sb.post_recv(i)?;
    }
    let addr = NetAddress::new(sb.nic.node(), b"bench");
    std::thread::scope(|sc| -> Result<(), String> {
        let w = sc.spawn(|| {
            sb.nic.connect_wait(&addr, Some(Duration::from_secs(10))).and_then(|r| r.accept(&sb.vi))
        });
        loop {
            match sa.vi.connect_request(
                &NetAddress::new(sa.nic.node(), b"c"),
                &addr,
                Some(Duration::from_secs(10)),
            ) {
                Err(Error::NoMatch) => std::thread::sleep(Duration::from_millis(2)),
                r => {
                    r.map_err(e)?;
                    break;
                }
            }
        }
        w.join().map_err(|_| "accept thread panicked")?.map_err(e)
    })?;
    Ok((sa, sb))
}

/// `n` 8-byte round trips; ns per one-way trip. Every ping-pong of this file (ours and the
/// references) starts its clock once the echo thread runs (`Barrier`), so no row counts a
/// thread's start.
fn pingpong(a: &Side, b: &Side, n: u32) -> Result<f64, String> {
    round_trips(a, b, n, false, false)
}

/// [`pingpong`] with each receive posted again as soon as it is taken, before the answer:
/// the order of a program that keeps few receives posted (for the record beside SCIF,
/// whose receive frees its ring slot inside the call).
fn pingpong_repost_first(a: &Side, b: &Side, n: u32) -> Result<f64, String> {
    round_trips(a, b, n, false, true)
}

/// `n` 8-byte round trips, each timed: the median one-way time in ns, the statistic of the
/// raw TCP ping-pong it is set beside across hosts (`tcp::ping_loop`), so that both rows
/// see a loaded machine's stalls alike.
fn pingpong_median(a: &Side, b: &Side, n: u32) -> Result<f64, String> {
    round_trips(a, b, n, true, false)
}

/// `n` round trips from `a` through `b`'s echo: the mean one-way time in ns over all of
/// them, or with `each` the median of each one timed (the clock read outside the loop
/// otherwise: one-host rows are a few hundred ns). With `repost_first` each side posts a
/// receive again as soon as it took it, before its answer.
fn round_trips(a: &Side, b: &Side, n: u32, each: bool, repost_first: bool) -> Result<f64, String> {
    a.prepare_send(8, None)?;
    b.prepare_send(8, None)?;
    let go = Barrier::new(2);
    std::thread::scope(|sc| -> Result<f64, String> {
        let echo = sc.spawn(|| -> Result<(), String> {
            go.wait();
            for _ in 0..n {
                let took = b.take()?;
                if repost_first {
                    b.repost(took)?;
                    b.send()?;
                } else {
                    b.send()?;
                    b.repost(took)?;
                }
            }
            Ok(())
        });
        go.wait();
        // Each side posts a receive it took again once its next message is out, while the
        // answer travels (`DEPTH` - 1 others stay posted meanwhile): a latency-minded VIA
        // program's order, which times the send→receive path alone. SCIF's receive frees
        // its ring slot inside the call, the raw ping-pong has none to free: the rows
        // print the other order (`repost_first`) for the record beside SCIF.
        let mut took = None;
        let mut leg = || -> Result<(), String> {
            a.send()?;
            if let Some(addr) = took.take() {
                a.repost(addr)?;
            }
            let addr = a.take()?;
            if repost_first {
                a.repost(addr)?;
            } else {
                took = Some(addr);
            }
            Ok(())
        };
        let ns = if each {
            let mut v = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let t = Instant::now();
                leg()?;
                v.push(t.elapsed().as_nanos() as f64 / 2.0);
            }
            median(&mut v)
        } else {
            let t = Instant::now();
            for _ in 0..n {
                leg()?;
            }
            t.elapsed().as_nanos() as f64 / (2.0 * n as f64)
        };
        if let Some(addr) = took {
            a.repost(addr)?;
        }
        echo.join().map_err(|_| "echo thread panicked")??;
        intact(a, b)?;
        Ok(ns)
    })
}

/// Both VIs still connected: a send that finds no receive for 50 ms (500 ms across hosts:
/// a receiver thread kept off the cores that long by a loaded machine) breaks a reliable
/// VI, and the rows after it would time sends that fail at once.
fn intact(a: &Side, b: &Side) -> Result<(), String> {
    match (a.vi.state(), b.vi.state()) {
        (ViState::Connected, ViState::Connected) => Ok(()),
        (x, y) => Err(format!(
            "a VI broke during the run ({x:?}/{y:?}): a send found no receive posted within 50 ms \
             (500 ms across hosts), the receiving thread was kept off the cores that long (machine \
             too loaded)"
        )),
    }
}

/// `n` back-to-back 64 KiB sends (or RDMA writes with immediate data, which take a
/// receive too) from `a` to `b`; bytes per second, from the first send (once the receiver
/// runs) to the last receive.
fn stream(a: &Side, b: &Side, n: u32, rdma: bool) -> Result<f64, String> {
    let remote = DataSegment { addr: b.buf.addr() as u64, handle: b.bh, len: 0 };
    a.prepare_send(KIB64, rdma.then_some(remote))?;
    let took = timed_sends(a, b, n, || b.recv())?;
    Ok(n as f64 * KIB64 as f64 / took.as_secs_f64())
}

/// `n` sends of what `a` prepared, to `b`, whose thread runs `receive` once per message;
/// the time from the first send (once the receiver runs) to the last `receive`'s end, if
/// both VIs are still connected after it ([`intact`]).
fn timed_sends(
    a: &Side,
    b: &Side,
    n: u32,
    receive: impl Fn() -> Result<(), String> + Sync,
) -> Result<Duration, String> {
    let go = Barrier::new(2);
    std::thread::scope(|sc| -> Result<Duration, String> {
        let rx = sc.spawn(|| -> Result<Instant, String> {
            go.wait();
            for _ in 0..n {
                receive()?;
            }
            Ok(Instant::now())
        });
        go.wait();
        let t = Instant::now();
        for _ in 0..n {
            a.send()?;
        }
        let end = rx.join().map_err(|_| "receiver panicked")??;
        intact(a, b)?;
        Ok(end.duration_since(t))
    })
}

pub(crate) fn vipl(
    batch: u32,
    rounds: u32,
    only_across_hosts: bool,
    only_latency: bool,
) -> Result<(), String> {
    if only_across_hosts {
        header();
        return across_hosts(batch, rounds);
    }
    let (na, nb) = nodes()?;
    let (a, b) = pair(&na, &nb, false)?;
    let (sc, ss) = scif_pair(&na, &nb)?;
    header();
    let (mut ours, mut raw, mut scif, mut first) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // The same number of round trips in every row's batch (ours and SCIF's ran a quarter
    // of the raw ping-pong's, so a start-up they share weighed four times as much).
    for _ in 0..rounds {
        raw.push(raw_shm(batch)?);
        scif.push(scif_pingpong(&sc, &ss, batch)?);
        ours.push(pingpong(&a, &b, batch)?);
        first.push(pingpong_repost_first(&a, &b, batch)?);
    }
    // Each ratio is the median of the rounds' own ratios (samples taken side by side), as
    // the rows across hosts do: steadier than the ratio of the medians while the machine's
    // speed drifts between rounds.
    let (vs_raw, vs_scif) = (median_ratio(&ours, &raw), median_ratio(&ours, &scif));
    let first_vs_scif = median_ratio(&first, &scif);
    let (o, r, s, f) = (median(&mut ours), median(&mut raw), median(&mut scif), median(&mut first));
    let ns = |x: f64| format!("{x:.0} ns");
    row("vipl send→recv 8 B one-way", ns(o), ns(r), vs_raw, "≤ 1.50 (raw shm ping-pong)");
    row("vipl send→recv 8 B vs SCIF", ns(o), ns(s), vs_scif, "≤ 1.00 (scif_send→recv 8 B)");
    row(
        "vipl 8 B vs SCIF, repost before answer",
        ns(f),
        ns(s),
        first_vs_scif,
        "(scif_send→recv 8 B; for the record)",
    );
    let _ = (sc.close(), ss.close());
    if only_latency {
        return Ok(());
    }
    let gbs = |x: f64| format!("{:.2} GB/s", x / 1e9);
    for (mode, name) in [(ViplTransfer::Copy, "copy"), (ViplTransfer::Dma, "dma")] {
        a.nic.set_transfer_mode(mode);
        for rdma in [false, true] {
            let (mut ours, mut cpy, mut shm) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..rounds {
                cpy.push(memcpy_same(&a, &b, 1024, rdma));
                if name == "copy" {
                    shm.push(raw_shm_messages(&a, &b, 512, rdma)?);
                }
                ours.push(stream(&a, &b, 512, rdma)?);
            }
            let what = if rdma { "RDMA write" } else { "send→recv" };
            let target =
                if name == "copy" { "≥ 0.80 (memcpy)" } else { "(memcpy; DMA mode, for the record)" };
            // Each round's stream beside the copies timed just before it, as the 8-byte rows.
            let (vs_shm, vs_cpy) =
                ((!shm.is_empty()).then(|| median_ratio(&ours, &shm)), median_ratio(&ours, &cpy));
            let (o, c) = (median(&mut ours), median(&mut cpy));
            row(&format!("vipl {what} 64 KiB ({name})"), gbs(o), gbs(c), vs_cpy, target);
            // Beside it, the fair reference: the same messages handed between the two
            // cores by bare shared memory (ratio per round, as the rows across hosts).
            if let Some(r) = vs_shm {
                let s = median(&mut shm);
                row(
                    &format!("vipl {what} 64 KiB vs raw shm"),
                    gbs(o),
                    gbs(s),
                    r,
                    "≥ 0.80 (raw shm messages)",
                );
            }
        }
    }
    a.nic.set_transfer_mode(ViplTransfer::Auto);
    // What the paper quotes of SCI hardware (its introduction), not VIA2SISCI's results.
    println!("{:<34} {:>14} {:>14}", "SCI hardware, as the paper quotes", "1.4 µs 4 B", "320 MB/s link");
    drop((a, b));
    across_hosts(batch, rounds)
}

/// The same between two nodes joined over TCP on loopback (as two hosts). Receivers wait in
/// `VipRecvWait` (spin, then sleep), as the raw TCP reference blocks in `recv`: both
/// "hosts" share two cores with the threads that carry the data.
fn across_hosts(batch: u32, rounds: u32) -> Result<(), String> {
    let tp = super::tcp::TcpPair::new()?;
    let (a, b) = pair(&tp.a, &tp.b, true)?;
    let n = (batch / 100).clamp(50, 500);
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..rounds.min(5) {
        raw.push(super::tcp::raw_tcp(8, n)?);
        ours.push(pingpong_median(&a, &b, n)?);
    }
    // The median of the rounds' own ratios, as the rows on one host.
    let ratio = median_ratio(&ours, &raw);
    let (o, r) = (median(&mut ours), median(&mut raw));
    let us = |x: f64| format!("{:.1} µs", x / 1e3);
    row("vipl 8 B one-way across hosts", us(o), us(r), ratio, "≤ 1.30 (raw TCP ping-pong)");
    let gbs = |x: f64| format!("{x:.2} GB/s");
    let mut bulk = Vec::new();
    for rdma in [false, true] {
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        // Rounds of a few milliseconds on a loaded machine: at least five, each ratio taken
        // within its round (the reference right before ours), the row's ratio their median.
        for _ in 0..rounds.max(5) {
            // 16 MiB each, four times the receives posted: the receiver's reposts count. The
            // reference moves the same messages over raw TCP: 64 KiB writes of the three
            // sources, each read into the receive slot in turn (the RDMA-write stream: into
            // the one range every write targets), as `memcpy_same` copies on one host.
            let slots = if rdma { 1 } else { DEPTH };
            raw.push(super::tcp::raw_tcp_messages(KIB64, FAR_STREAM, slots)?);
            ours.push(stream(&a, &b, FAR_STREAM as u32, rdma)? / 1e9);
            if !rdma {
                bulk.push(super::tcp::raw_tcp_bulk(FAR_STREAM * KIB64)?);
            }
        }
        let ratio = median_ratio(&ours, &raw);
        let (o, r) = (median(&mut ours), median(&mut raw));
        let what = if rdma { "RDMA write" } else { "send" };
        row(&format!("vipl {what} 64 KiB across hosts"), gbs(o), gbs(r), ratio, "≥ 0.80 (raw TCP messages)");
    }
    // The same 16 MiB as one byte stream (1 MiB writes, one read into one 16 MiB buffer),
    // the reference of these rows before: not the shape of a message stream.
    println!("{:<34} {:>14} {:>14}", "raw TCP 16 MiB bulk (for the record)", "", gbs(median(&mut bulk)));
    drop((a, b));
    starved::rows(&tp, rounds)
}
