//! `dma`: DMA bandwidth by size, one or sixteen transfers per post, beside `memcpy`; and
//! 16 MiB to and from a segment of another host (two nodes joined over TCP on loopback)
//! beside a raw TCP transfer of the same size.

use super::common::*;
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, RemoteSegment};
use std::time::{Duration, Instant};

pub(crate) fn dma(reps: u32) -> Result<(), String> {
    use remora_sisci::{DmaFlags, DmaQueue};
    let (a, b) = nodes()?;
    const MAX: usize = 64 << 20;
    let da = Descriptor::open(&a).map_err(e)?;
    let db = Descriptor::open(&b).map_err(e)?;
    let target = LocalSegment::create(&da, None, MAX, CreateFlags::default()).map_err(e)?;
    target.prepare(0).map_err(e)?;
    target.set_available(0).map_err(e)?;
    let src = LocalSegment::create(&db, None, MAX, CreateFlags::default()).map_err(e)?;
    src.prepare(0).map_err(e)?;
    let remote =
        RemoteSegment::connect(&db, a.local_node_id(), target.id(), 0, Some(Duration::from_secs(10)))
            .map_err(e)?;
    let q = DmaQueue::create(&db, 0, 16).map_err(e)?;
    let wait = DmaFlags { read: false, wait: true };
    // Touch every page on both sides once.
    q.start(&src, &remote, 0, MAX, 0, wait, None).map_err(e)?;
    let srcbuf = vec![0x5au8; MAX];
    let mut dstbuf = vec![0u8; MAX];
    dstbuf.copy_from_slice(&srcbuf);
    header();
    let mut lat = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        q.start(&src, &remote, 0, 8, 0, wait, None).map_err(e)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let mut raw8 = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        std::hint::black_box(&mut dstbuf[..8]).copy_from_slice(std::hint::black_box(&srcbuf[..8]));
        raw8.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (o, t) = (median(&mut lat), median(&mut raw8));
    row(
        "DMA 8 B post-to-completion",
        format!("{o:.2} µs"),
        format!("{:.3} µs", t),
        o / t.max(1e-9),
        "reported (memcpy 8 B)",
    );
    let mut size = 64 << 10;
    while size <= MAX {
        let iters = ((256 << 20) / size).max(2);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let t = Instant::now();
            for _ in 0..iters {
                std::hint::black_box(&mut dstbuf[..size])
                    .copy_from_slice(std::hint::black_box(&srcbuf[..size]));
            }
            theirs.push((size * iters) as f64 / t.elapsed().as_secs_f64() / 1e9);
            let t = Instant::now();
            for _ in 0..iters {
                q.start(&src, &remote, 0, size, 0, wait, None).map_err(e)?;
            }
            ours.push((size * iters) as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        let (o, t) = (median(&mut ours), median(&mut theirs));
        row(
            &format!("DMA {} KiB, 1 per post", size >> 10),
            format!("{o:.2} GB/s"),
            format!("{t:.2} GB/s"),
            o / t,
            "≥ 0.80 (memcpy)",
        );
        size *= 4;
    }
    // The same sizes with 16 transfers per post (a queue of depth 16): the engine's
    // per-post cost is paid once for 16 copies, as a DMA queue is meant to be used.
    const DEPTH: usize = 16;
    let mut size = 64 << 10;
    while size * DEPTH <= MAX {
        let vec: Vec<remora_sisci::DmaVec> = (0..DEPTH)
            .map(|i| remora_sisci::DmaVec { size, local_offset: i * size, remote_offset: i * size })
            .collect();
        let iters = ((256 << 20) / (size * DEPTH)).max(2);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let t = Instant::now();
            for _ in 0..iters {
                for i in 0..DEPTH {
                    let r = i * size..(i + 1) * size;
                    std::hint::black_box(&mut dstbuf[r.clone()])
                        .copy_from_slice(std::hint::black_box(&srcbuf[r]));
                }
            }
            theirs.push((size * DEPTH * iters) as f64 / t.elapsed().as_secs_f64() / 1e9);
            let t = Instant::now();
            for _ in 0..iters {
                q.start_vec(&src, &remote, &vec, wait, None).map_err(e)?;
            }
            ours.push((size * DEPTH * iters) as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        let (o, t) = (median(&mut ours), median(&mut theirs));
        row(
            &format!("DMA {} KiB, 16 per post", size >> 10),
            format!("{o:.2} GB/s"),
            format!("{t:.2} GB/s"),
            o / t,
            "≥ 0.80 (memcpy)",
        );
        size *= 4;
    }
    q.remove().map_err(e)?;
    across_hosts(reps)
}

/// DMA of 16 MiB into (and out of) a segment of a node joined over TCP on loopback (as
/// between hosts), beside a raw TCP transfer of the same size, interleaved.
fn across_hosts(reps: u32) -> Result<(), String> {
    use remora_sisci::{DmaFlags, DmaQueue};
    const LEN: usize = 16 << 20;
    let pair = super::tcp::TcpPair::new()?;
    let (da, db) = (Descriptor::open(&pair.a).map_err(e)?, Descriptor::open(&pair.b).map_err(e)?);
    let target = LocalSegment::create(&db, None, LEN, CreateFlags::default()).map_err(e)?;
    target.prepare(0).map_err(e)?;
    target.set_available(0).map_err(e)?;
    let src = LocalSegment::create(&da, None, LEN, CreateFlags::default()).map_err(e)?;
    src.prepare(0).map_err(e)?;
    let remote = RemoteSegment::connect(&da, 8, target.id(), 0, Some(Duration::from_secs(10))).map_err(e)?;
    let q = DmaQueue::create(&da, 0, 16).map_err(e)?;
    let (write, read) = (DmaFlags { read: false, wait: true }, DmaFlags { read: true, wait: true });
    // Touch every page on both sides once.
    q.start(&src, &remote, 0, LEN, 0, write, None).map_err(e)?;
    let (mut w, mut r, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    // Loopback TCP swings run to run (0.55-1.96 of itself): at least nine rounds, each
    // judged beside its own raw transfer (the median of the rounds' ratios).
    for _ in 0..reps.max(9) {
        let t = Instant::now();
        q.start(&src, &remote, 0, LEN, 0, write, None).map_err(e)?;
        w.push(LEN as f64 / t.elapsed().as_secs_f64() / 1e9);
        let t = Instant::now();
        q.start(&src, &remote, 0, LEN, 0, read, None).map_err(e)?;
        r.push(LEN as f64 / t.elapsed().as_secs_f64() / 1e9);
        raw.push(super::tcp::raw_tcp_bulk(LEN)?);
    }
    let (wr, rr) = (median_ratio(&w, &raw), median_ratio(&r, &raw));
    let (w, r, raw) = (median(&mut w), median(&mut r), median(&mut raw));
    let gbs = |x: f64| format!("{x:.2} GB/s");
    row("DMA 16 MiB across hosts (TCP)", gbs(w), gbs(raw), wr, "≥ 0.80 (raw TCP, loopback)");
    row("DMA 16 MiB read across hosts (TCP)", gbs(r), gbs(raw), rr, "≥ 0.80 (raw TCP, loopback)");
    q.remove().map_err(e)?;
    Ok(())
}
