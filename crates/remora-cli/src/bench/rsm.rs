//! `rsm`: the RSM personality between two nodes of this host, each row beside its
//! reference in the same run: map ping-pong beside the raw shared-memory ping-pong;
//! a `put64` (8-byte `put`) ping-pong beside the map's; 1 MiB `put`/`get` beside `memcpy`;
//! barrier open+close beside a SISCI sequence start+check; signal ping-pong beside a SISCI
//! interrupt ping-pong. Both sides are threads of this process, each with a controller of
//! its own node (the memory path is the same as between processes). The three ping-pong
//! rows are timed alike, in chunks of round trips, and each is the median of its chunks.

use super::common::*;
use remora_rsm::{
    BarrierMode, BarrierType, Controller, CreateFlags, ExportSegment, ImportSegment, MapAttr, Permission,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const ID_A: u32 = 0x7e10_0001;
const ID_B: u32 = 0x7e10_0002;
const ID_BIG: u32 = 0x7e10_0003;
const MIB: usize = 1 << 20;

fn pages(bytes: usize) -> &'static mut [u8] {
    let page = remora_sys::page_size();
    let mem: &'static mut [u8] = Box::leak(vec![0u8; bytes + page].into_boxed_slice());
    let skip = (page - mem.as_ptr() as usize % page) % page;
    &mut mem[skip..skip + bytes]
}

/// One side's view: its own export (polled through a map of its own import of it) and its
/// import of the other side's export (stored into).
struct Side {
    own: ImportSegment,
    other: ImportSegment,
}

fn side(
    ctl: &Controller,
    own_node: u32,
    own_id: u32,
    other_node: u32,
    other_id: u32,
) -> Result<Side, String> {
    let own = ImportSegment::connect(ctl, own_node, own_id, Permission::READ_WRITE).map_err(e)?;
    own.map(None, MapAttr::None, Permission::READ_WRITE, 0, 4096).map_err(e)?;
    let other = ImportSegment::connect(ctl, other_node, other_id, Permission::READ_WRITE).map_err(e)?;
    other.map(None, MapAttr::None, Permission::READ_WRITE, 0, 4096).map_err(e)?;
    Ok(Side { own, other })
}

/// One word into the other side's export with `put` (what `rsm_memseg_import_put64` and an
/// 8-byte `rsm_memseg_import_put` both do).
fn send(s: &Side, off: usize, v: u64) -> Result<(), String> {
    s.other.put(off, &v.to_ne_bytes()).map_err(e)
}

/// Round trips per timed chunk of a ping-pong batch. Every ping-pong row is the median over
/// the chunks of all its batches: on this machine's two shared cores a batch often loses a
/// core for a scheduler slice (or starts before its echo thread runs), which, spread over
/// a whole batch, moved a row's figure by several times from run to run; a chunk median
/// counts such a moment once, and every row (raw, map, put) is measured alike.
const CHUNK: u64 = 100;

/// `n` round trips `trip(1..=n)` (each sends its number and waits for the echo): ns per
/// one-way trip of each chunk of [`CHUNK`] (of `n` when `--batch` asks fewer: never no row).
fn chunked(n: u64, mut trip: impl FnMut(u64) -> Result<(), String>) -> Result<Vec<f64>, String> {
    let chunk = CHUNK.min(n).max(1);
    let mut out = Vec::with_capacity((n / chunk) as usize);
    let mut t = Instant::now();
    for i in 1..=n {
        trip(i)?;
        if i % chunk == 0 {
            out.push(t.elapsed().as_nanos() as f64 / (2 * chunk) as f64);
            t = Instant::now();
        }
    }
    Ok(out)
}

/// The main side of a ping-pong of plain words: store into `out`, wait for the echo in `inp`.
fn chunked_words(out: &AtomicU64, inp: &AtomicU64, base: u64, n: u32) -> Result<Vec<f64>, String> {
    chunked(n as u64, |i| {
        out.store(base + i, Ordering::Release);
        wait_for(inp, base + i)
    })
}

/// Map ping-pongs: each side stores into its map of the other's export and polls its map
/// of its own, holding both words for the batch (as the raw reference holds its mapping).
fn pingpong_map(a: &Side, b: &Side, n: u32, base: u64) -> Result<Vec<f64>, String> {
    std::thread::scope(|sc| -> Result<Vec<f64>, String> {
        let echo_t = sc.spawn(move || -> Result<(), String> {
            b.other
                .with_atomic(0, |o| b.own.with_atomic(0, |i| echo(o, i, base, n)))
                .map_err(e)?
                .map_err(e)?
        });
        let v = a
            .other
            .with_atomic(0, |o| a.own.with_atomic(0, |i| chunked_words(o, i, base, n)))
            .map_err(e)?
            .map_err(e)??;
        echo_t.join().map_err(|_| "echo thread panicked".to_string())??;
        Ok(v)
    })
}

/// `put` ping-pongs: each side puts the word into the other's export and polls its own
/// export as the map ping-pong does (an exporter reads its own memory), so that the row
/// differs from the map's only in how the word is stored.
fn pingpong_put(a: &Side, b: &Side, off: usize, n: u32, base: u64) -> Result<Vec<f64>, String> {
    std::thread::scope(|sc| -> Result<Vec<f64>, String> {
        let echo_t = sc.spawn(move || -> Result<(), String> {
            b.own
                .with_atomic(off, |w| -> Result<(), String> {
                    for i in 1..=n as u64 {
                        wait_for(w, base + i)?;
                        send(b, off, base + i)?;
                    }
                    Ok(())
                })
                .map_err(e)?
        });
        let v = a
            .own
            .with_atomic(off, |w| {
                chunked(n as u64, |i| {
                    send(a, off, base + i)?;
                    wait_for(w, base + i)
                })
            })
            .map_err(e)??;
        echo_t.join().map_err(|_| "echo thread panicked".to_string())??;
        Ok(v)
    })
}

/// The reference: the same ping-pong through a shared-memory file of our own, a word on
/// each of two pages.
fn raw_pingpong(n: u32, base: u64) -> Result<Vec<f64>, String> {
    let path = format!("/dev/shm/remora-bench-rsm-{}", std::process::id());
    let m1 = raw_file(&path, true)?;
    let m2 = raw_file(&path, false)?;
    let _ = std::fs::remove_file(&path);
    std::thread::scope(|sc| -> Result<Vec<f64>, String> {
        let m2 = &m2;
        let echo_t = sc.spawn(move || -> Result<(), String> {
            let (o, i) = (m2.atomic_u64(4096).ok_or("raw")?, m2.atomic_u64(0).ok_or("raw")?);
            echo(o, i, base, n)
        });
        let (o, i) = (m1.atomic_u64(0).ok_or("raw")?, m1.atomic_u64(4096).ok_or("raw")?);
        let v = chunked_words(o, i, base, n)?;
        echo_t.join().map_err(|_| "echo thread panicked".to_string())??;
        Ok(v)
    })
}

pub(crate) fn rsm(batch: u32, rounds: u32, reps: u32) -> Result<(), String> {
    let (sa, sb) = nodes()?;
    let (na, nb) = (sa.local_node_id(), sb.local_node_id());
    let ca = Controller::with_config("remora0", sa.config().clone()).map_err(e)?;
    let cb = Controller::with_config("remora0", sb.config().clone()).map_err(e)?;
    let ea = ExportSegment::create(&ca, pages(4096), CreateFlags::default()).map_err(e)?;
    let eb = ExportSegment::create(&cb, pages(4096), CreateFlags::default()).map_err(e)?;
    ea.publish(ID_A, None).map_err(e)?;
    eb.publish(ID_B, None).map_err(e)?;
    let a = side(&ca, na, ID_A, nb, ID_B)?;
    let b = side(&cb, nb, ID_B, na, ID_A)?;
    header();

    // Interleave the kinds so that a noisy moment hits all of them alike.
    let (mut raw, mut map, mut put) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let base = r as u64 * 1_000_000;
        raw.extend(raw_pingpong(batch, base)?);
        map.extend(pingpong_map(&a, &b, batch, base)?);
        put.extend(pingpong_put(&a, &b, 8 * (1 + r as usize % 64), batch, base)?);
    }
    let (raw, map, p64) = (median(&mut raw), median(&mut map), median(&mut put));
    row(
        "rsm map ping-pong one-way",
        format!("{map:.0} ns"),
        format!("{raw:.0} ns"),
        map / raw,
        "≤ 1.20 (raw shm ping-pong)",
    );
    row(
        "rsm put64 (8 B put) one-way",
        format!("{p64:.0} ns"),
        format!("{map:.0} ns"),
        p64 / map,
        "≤ 2 (rsm map store)",
    );

    // Bandwidth of 1 MiB put/get into an export of the other node, beside memcpy.
    let big = ExportSegment::create(&cb, pages(4 * MIB), CreateFlags::default()).map_err(e)?;
    big.publish(ID_BIG, None).map_err(e)?;
    let imp = ImportSegment::connect(&ca, nb, ID_BIG, Permission::READ_WRITE).map_err(e)?;
    let src = vec![0x5au8; MIB];
    let mut dst = vec![0u8; MIB];
    let (mut put_bw, mut get_bw, mut cpy_bw) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let off = 0;
        let t = Instant::now();
        imp.put(off, &src).map_err(e)?;
        put_bw.push(MIB as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        imp.get(off, &mut dst).map_err(e)?;
        get_bw.push(MIB as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        cpy_bw.push(MIB as f64 / t.elapsed().as_secs_f64());
        std::hint::black_box(&dst);
    }
    let (pb, gb, cb_) = (median(&mut put_bw), median(&mut get_bw), median(&mut cpy_bw));
    let gbs = |x: f64| format!("{:.2} GB/s", x / 1e9);
    row("rsm put 1 MiB", gbs(pb), gbs(cb_), pb / cb_, "≥ 0.80 (memcpy)");
    row("rsm get 1 MiB", gbs(gb), gbs(cb_), gb / cb_, "≥ 0.80 (memcpy)");

    // Barrier open+close on an idle import, beside a SISCI sequence start+check.
    imp.set_mode(BarrierMode::Explicit).map_err(e)?;
    let bar = imp.init_barrier(BarrierType::Segment).map_err(e)?;
    let n = 2000;
    let t = Instant::now();
    for _ in 0..n {
        bar.open().map_err(e)?;
        bar.close().map_err(e)?;
    }
    let ours = t.elapsed().as_nanos() as f64 / n as f64;
    let theirs = sisci_sequence(&sa, &sb, n)?;
    row_us("rsm barrier open+close", ours, theirs, "(SISCI sequence start+check)");

    // Signal ping-pong beside a SISCI interrupt ping-pong, both waiting the same way.
    let sig = signal_pingpong(&a, &b, &ea, &eb, 20000)?;
    let intr = interrupt_pingpong(&sa, &sb, 20000)?;
    row_us("rsm signal post→wait one-way", sig, intr, "(SISCI interrupt trigger→wait)");
    drop((a, b, imp, bar));
    across_hosts(rounds, reps)
}

/// The same nodes joined over TCP on loopback, as two hosts: a map ping-pong through the
/// DSM beside a raw TCP ping-pong, and 1 MiB put/get beside a raw TCP transfer.
fn across_hosts(rounds: u32, reps: u32) -> Result<(), String> {
    let pair = super::tcp::TcpPair::new()?;
    let ca = Controller::with_config("remora0", pair.a.config().clone()).map_err(e)?;
    let cb = Controller::with_config("remora0", pair.b.config().clone()).map_err(e)?;
    let ea = ExportSegment::create(&ca, pages(4096), CreateFlags::default()).map_err(e)?;
    let eb = ExportSegment::create(&cb, pages(4096), CreateFlags::default()).map_err(e)?;
    ea.publish(ID_A, None).map_err(e)?;
    eb.publish(ID_B, None).map_err(e)?;
    let a = side(&ca, 4, ID_A, 8, ID_B)?;
    let b = side(&cb, 8, ID_B, 4, ID_A)?;
    let n = (rounds * 40).max(100);
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for r in 0..4u64 {
        let base = r * 1_000_000;
        let v = std::thread::scope(|sc| -> Result<Vec<f64>, String> {
            let echo_t = sc.spawn(|| -> Result<(), String> {
                b.other
                    .with_atomic(0, |o| {
                        b.own.with_atomic(0, |i| -> Result<(), String> {
                            super::common::fresh_looks();
                            for k in 1..=n as u64 {
                                wait_yielding(i, base + k)?;
                                o.store(base + k, std::sync::atomic::Ordering::Release);
                            }
                            Ok(())
                        })
                    })
                    .map_err(e)?
                    .map_err(e)?
            });
            let mut v = Vec::new();
            a.other
                .with_atomic(0, |o| {
                    a.own.with_atomic(0, |i| -> Result<(), String> {
                        super::common::fresh_looks();
                        for k in 1..=n as u64 {
                            let t = Instant::now();
                            o.store(base + k, std::sync::atomic::Ordering::Release);
                            wait_yielding(i, base + k)?;
                            v.push(t.elapsed().as_nanos() as f64 / 2.0);
                        }
                        Ok(())
                    })
                })
                .map_err(e)?
                .map_err(e)??;
            echo_t.join().map_err(|_| "echo thread panicked".to_string())??;
            Ok(v)
        })?;
        ours.push(median(&mut v.clone()));
        raw.push(super::tcp::raw_tcp(8, n)?);
    }
    let (o, t) = (median(&mut ours), median(&mut raw));
    row_us("rsm map ping-pong across hosts", o, t, "reported: both nodes on loopback (≤ 3 is for two hosts)");

    let big = ExportSegment::create(&cb, pages(4 * MIB), CreateFlags::default()).map_err(e)?;
    big.publish(ID_BIG, None).map_err(e)?;
    let imp = ImportSegment::connect(&ca, 8, ID_BIG, Permission::READ_WRITE).map_err(e)?;
    let src = remora_rsm::UserRegion::from_static(pages(MIB));
    let dst = remora_rsm::UserRegion::from_static(pages(MIB));
    let (mut put_bw, mut get_bw, mut tcp_bw) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        imp.put_region(0, src).map_err(e)?;
        put_bw.push(MIB as f64 / t.elapsed().as_secs_f64() / 1e9);
        let t = Instant::now();
        imp.get_region(0, dst).map_err(e)?;
        get_bw.push(MIB as f64 / t.elapsed().as_secs_f64() / 1e9);
        tcp_bw.push(super::tcp::raw_tcp_bulk(MIB)?);
    }
    let (pb, gb, tb) = (median(&mut put_bw), median(&mut get_bw), median(&mut tcp_bw));
    let gbs = |x: f64| format!("{x:.2} GB/s");
    row("rsm put 1 MiB across hosts", gbs(pb), gbs(tb), pb / tb, "≥ 0.80 (raw TCP transfer, loopback)");
    row("rsm get 1 MiB across hosts", gbs(gb), gbs(tb), gb / tb, "≥ 0.80 (raw TCP transfer, loopback)");
    drop((a, b, imp, ea, eb, big));
    Ok(())
}

fn sisci_sequence(sa: &remora_sisci::Sisci, sb: &remora_sisci::Sisci, n: u32) -> Result<f64, String> {
    use remora_sisci::{CreateFlags as F, Descriptor, LocalSegment, MapFlags, RemoteSegment};
    let db = Descriptor::open(sb).map_err(e)?;
    let seg = LocalSegment::create(&db, Some(0x7e10_0010), 4096, F::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let da = Descriptor::open(sa).map_err(e)?;
    let rs = RemoteSegment::connect(&da, sb.local_node_id(), 0x7e10_0010, 0, Some(Duration::from_secs(5)))
        .map_err(e)?;
    let map = rs.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    let seq = map.create_sequence().map_err(e)?;
    let t = Instant::now();
    for _ in 0..n {
        seq.start().map_err(e)?;
        seq.check(false, false).map_err(e)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

fn signal_pingpong(
    a: &Side,
    b: &Side,
    ea: &ExportSegment,
    eb: &ExportSegment,
    n: u32,
) -> Result<f64, String> {
    let limit = Some(Duration::from_secs(10));
    std::thread::scope(|sc| -> Result<f64, String> {
        let echo = sc.spawn(move || -> Result<(), String> {
            for _ in 0..n {
                eb.signal_wait(limit).map_err(e)?;
                b.other.signal_post(false).map_err(e)?;
            }
            Ok(())
        });
        let t = Instant::now();
        for _ in 0..n {
            a.other.signal_post(false).map_err(e)?;
            ea.signal_wait(limit).map_err(e)?;
        }
        let ns = t.elapsed().as_nanos() as f64 / (2.0 * n as f64);
        echo.join().map_err(|_| "echo thread panicked".to_string())??;
        Ok(ns)
    })
}

fn interrupt_pingpong(sa: &remora_sisci::Sisci, sb: &remora_sisci::Sisci, n: u32) -> Result<f64, String> {
    use remora_sisci::{Descriptor, Interrupt, RemoteInterrupt};
    let (da, db) = (Descriptor::open(sa).map_err(e)?, Descriptor::open(sb).map_err(e)?);
    let ia = Interrupt::create(&da, 0, Some(0x7e10_0020), true, None).map_err(e)?;
    let ib = Interrupt::create(&db, 0, Some(0x7e10_0021), true, None).map_err(e)?;
    let limit = Some(Duration::from_secs(10));
    let to_b = RemoteInterrupt::connect(&da, sb.local_node_id(), 0, 0x7e10_0021, limit).map_err(e)?;
    let to_a = RemoteInterrupt::connect(&db, sa.local_node_id(), 0, 0x7e10_0020, limit).map_err(e)?;
    std::thread::scope(|sc| -> Result<f64, String> {
        let (ib, to_a) = (&ib, &to_a);
        let echo = sc.spawn(move || -> Result<(), String> {
            for _ in 0..n {
                ib.wait(limit).map_err(e)?;
                to_a.trigger().map_err(e)?;
            }
            Ok(())
        });
        let t = Instant::now();
        for _ in 0..n {
            to_b.trigger().map_err(e)?;
            ia.wait(limit).map_err(e)?;
        }
        let ns = t.elapsed().as_nanos() as f64 / (2.0 * n as f64);
        echo.join().map_err(|_| "echo thread panicked".to_string())??;
        Ok(ns)
    })
}
