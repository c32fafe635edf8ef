//! `pio`, `memcpy`, `connect`: stores, copies and connects to a segment of another node of
//! this host, each beside its raw reference.

use super::common::*;
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, MapFlags, RemoteSegment, Sisci};
use std::io::Write;
use std::time::{Duration, Instant};

pub(crate) const PARENT_SEG: u32 = 0x7e00_0001;
pub(crate) const CHILD_SEG: u32 = 0x7e00_0002;

pub(crate) fn pio(batch: u32, rounds: u32) -> Result<(), String> {
    let (a, b) = nodes()?;
    let raw_path = format!("/dev/shm/remora-bench-{}", std::process::id());
    let raw = raw_file(&raw_path, true)?;
    let dev = Descriptor::open(&a).map_err(e)?;
    let seg = LocalSegment::create(&dev, Some(PARENT_SEG), 4096, CreateFlags::default()).map_err(e)?;
    let local = seg.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let (peer, batch_s, rounds_s) = (a.local_node_id().to_string(), batch.to_string(), rounds.to_string());
    let (peer_seg, own_seg) = (PARENT_SEG.to_string(), CHILD_SEG.to_string());
    let args = [
        "pio-child",
        "--raw-path",
        &raw_path,
        "--peer-node",
        &peer,
        "--peer-seg",
        &peer_seg,
        "--own-seg",
        &own_seg,
        "--batch",
        &batch_s,
        "--rounds",
        &rounds_s,
    ];
    let (mut child, _) = spawn_responder(b.local_node_id(), &args)?;
    let remote = RemoteSegment::connect(&dev, b.local_node_id(), CHILD_SEG, 0, Some(Duration::from_secs(10)))
        .map_err(e)?;
    let rmap = remote.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let result = (|| -> Result<(), String> {
        for r in 0..rounds as u64 {
            let base = r * batch as u64 * 4;
            // Raw: parent writes word 0 of the file, child echoes into word 512 (next page).
            let rout = raw.atomic_u64(0).ok_or("raw map")?;
            let rin = raw.atomic_u64(4096).ok_or("raw map")?;
            theirs.push(pingpong(rout, rin, base, batch)?);
            // Remora: parent stores into the child's segment, child into ours.
            let t = rmap.with_atomic(0, |out| local.with_atomic(0, |inp| pingpong(out, inp, base, batch)));
            ours.push(t.map_err(e)?.map_err(e)??);
        }
        Ok(())
    })();
    let _ = child.wait();
    let _ = std::fs::remove_file(&raw_path);
    result?;
    let (o, t) = (median(&mut ours), median(&mut theirs));
    header();
    row(
        "pio one-way latency (store→seen)",
        format!("{o:.0} ns"),
        format!("{t:.0} ns"),
        o / t,
        "≤ 1.20 (raw shm ping-pong)",
    );
    drop((rmap, local));
    Ok(())
}

pub(crate) fn pio_child(
    raw_path: &str,
    peer_node: u32,
    peer_seg: u32,
    own_seg: u32,
    batch: u32,
    rounds: u32,
) -> Result<(), String> {
    let sci = Sisci::initialize().map_err(e)?;
    let raw = raw_file(raw_path, false)?;
    let dev = Descriptor::open(&sci).map_err(e)?;
    let seg = LocalSegment::create(&dev, Some(own_seg), 4096, CreateFlags::default()).map_err(e)?;
    let local = seg.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let remote =
        RemoteSegment::connect(&dev, peer_node, peer_seg, 0, Some(Duration::from_secs(10))).map_err(e)?;
    let rmap = remote.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    println!("ready");
    std::io::stdout().flush().map_err(e)?;
    for r in 0..rounds as u64 {
        let base = r * batch as u64 * 4;
        echo(raw.atomic_u64(4096).ok_or("raw")?, raw.atomic_u64(0).ok_or("raw")?, base, batch)?;
        rmap.with_atomic(0, |out| local.with_atomic(0, |inp| echo(out, inp, base, batch)))
            .map_err(e)?
            .map_err(e)??;
    }
    // Keep the segment until the parent has finished reading its last echo.
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}

pub(crate) fn memcpy(reps: u32) -> Result<(), String> {
    let (a, b) = nodes()?;
    const MAX: usize = 64 << 20;
    let da = Descriptor::open(&a).map_err(e)?;
    let db = Descriptor::open(&b).map_err(e)?;
    let seg = LocalSegment::create(&da, None, MAX, CreateFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let remote = RemoteSegment::connect(&db, a.local_node_id(), seg.id(), 0, Some(Duration::from_secs(10)))
        .map_err(e)?;
    let map = remote.map(0, MAX, None, MapFlags::default()).map_err(e)?;
    let src = vec![0x5au8; MAX];
    let mut dst = vec![0u8; MAX];
    // Touch every page once so neither side measures page faults.
    remora_sisci::mem_copy(None, &src, &map, 0, false).map_err(e)?;
    dst.copy_from_slice(&src);
    header();
    let mut size = 64 << 10;
    while size <= MAX {
        let iters = (256 << 20) / size; // ~256 MiB per sample
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            for _ in 0..iters {
                std::hint::black_box(&mut dst[..size]).copy_from_slice(std::hint::black_box(&src[..size]));
            }
            theirs.push((size * iters) as f64 / t.elapsed().as_secs_f64() / 1e9);
            let t = Instant::now();
            for _ in 0..iters {
                remora_sisci::mem_copy(None, std::hint::black_box(&src[..size]), &map, 0, false)
                    .map_err(e)?;
            }
            ours.push((size * iters) as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        let (o, t) = (median(&mut ours), median(&mut theirs));
        row(
            &format!("SCIMemCpy {} KiB", size >> 10),
            format!("{o:.2} GB/s"),
            format!("{t:.2} GB/s"),
            o / t,
            "≥ 0.90 (memcpy)",
        );
        size *= 4;
    }
    drop(map);
    remote.disconnect().map_err(e)?;
    seg.remove().map_err(e)?;
    Ok(())
}

pub(crate) fn connect(samples: u32) -> Result<(), String> {
    let (a, b) = nodes()?;
    let da = Descriptor::open(&a).map_err(e)?;
    let db = Descriptor::open(&b).map_err(e)?;
    let seg = LocalSegment::create(&da, None, 1 << 20, CreateFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let mut v = Vec::new();
    let mut raw = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        let r = RemoteSegment::connect(&db, a.local_node_id(), seg.id(), 0, Some(Duration::from_secs(10)))
            .map_err(e)?;
        let m = r.map(0, r.size(), None, MapFlags::default()).map_err(e)?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
        m.unmap().map_err(e)?;
        r.disconnect().map_err(e)?;
        // Reference: open and map a raw shared-memory file of the same size.
        let t = Instant::now();
        let f = remora_sys::Memfd::create("bench", 1 << 20).map_err(e)?;
        let m = remora_sys::Mapping::new(std::os::fd::AsFd::as_fd(&f), 0, 1 << 20, Default::default())
            .map_err(e)?;
        raw.push(t.elapsed().as_secs_f64() * 1e6);
        drop((m, f));
    }
    let (o, t) = (median(&mut v), median(&mut raw));
    header();
    row(
        "connect + map (other node, 1 MiB)",
        format!("{o:.1} µs"),
        format!("{t:.1} µs"),
        o / t,
        "median ≤ 100 µs (reference: memfd+mmap)",
    );
    seg.remove().map_err(e)?;
    Ok(())
}
