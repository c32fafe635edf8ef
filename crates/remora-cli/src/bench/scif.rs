//! `remora bench scif`: SCIF between two processes on two nodes of this host, each path
//! beside its reference in the same run.
//!
//! * 8-byte `scif_send` → `scif_recv` one-way latency (half a ping-pong round trip, the
//!   receiver polling in a blocking receive) beside a raw shared-memory ping-pong and,
//!   when `ucx_perftest` is installed (Debian's `ucx-utils`), UCX's tagged-message latency
//!   over shared memory (`UCX_TLS=shm,self`).
//! * `scif_writeto` and `scif_vwriteto` bandwidth beside `memcpy` of the same size.
//! * Store latency through a `scif_mmap`ed peer window beside the raw ping-pong (the
//!   reference of the SISCI PIO figure).

use super::common::{e, header, median, median_ratio, row, spawn_responder};
use remora_scif::{Endpoint, PortId, Prot, RmaFlags, Scif, UserRegion};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Instant;

const BIG: usize = 64 << 20;
const BIG_OFF: u64 = 0;
const PAGE_OFF: u64 = 1 << 30;

/// A page-aligned region of `len` bytes that lives as long as the process.
pub(crate) fn leak(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
    let start = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
    UserRegion::from_static(&mut v[start..start + len])
}

fn msg(ep: &Endpoint, v: u64) -> Result<(), String> {
    match ep.send(&v.to_le_bytes(), true) {
        Ok(8) => Ok(()),
        other => Err(format!("scif_send failed: {other:?}")),
    }
}

fn get(ep: &Endpoint) -> Result<u64, String> {
    let mut b = [0u8; 8];
    match ep.recv(&mut b, true) {
        Ok(8) => Ok(u64::from_le_bytes(b)),
        other => Err(format!("scif_recv failed: {other:?}")),
    }
}

/// One batch of 8-byte ping-pongs over SCIF; nanoseconds per one-way trip.
fn scif_pingpong(epd: &Endpoint, n: u32) -> Result<f64, String> {
    let t = Instant::now();
    for i in 0..n as u64 {
        msg(epd, i)?;
        if get(epd)? != i {
            return Err("echo out of order".into());
        }
    }
    Ok(t.elapsed().as_nanos() as f64 / (2.0 * n as f64))
}

fn scif_echo(epd: &Endpoint, n: u32) -> Result<(), String> {
    for _ in 0..n {
        let v = get(epd)?;
        msg(epd, v)?;
    }
    Ok(())
}

/// UCX's 8-byte tagged latency over shared memory, in ns (None when not installed).
fn ucx_tag_lat() -> Option<f64> {
    let side = |_| {
        let mut c = Command::new("ucx_perftest");
        c.env("UCX_TLS", "shm,self");
        c
    };
    ucx_tag_lat_with(side, "127.0.0.1", 200_000)
}

/// `ucx_perftest -t tag_lat -s 8 -n n`, its typical one-way latency in ns (None when it is
/// not installed or fails): `side(2)` is the server's command, `side(1)` the client's, which
/// reaches the server at `server_addr`; each says where it runs and over what transport.
pub(crate) fn ucx_tag_lat_with(side: impl Fn(usize) -> Command, server_addr: &str, n: u32) -> Option<f64> {
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port().to_string();
    let n = n.to_string();
    let args = ["-t", "tag_lat", "-s", "8", "-n", &n, "-p", &port];
    let mut server = side(2).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().ok()?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = side(1).arg(server_addr).args(args).output();
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.ok()?.stdout).to_string();
    let line = text.lines().find(|l| l.trim_start().starts_with("Final:"))?;
    let p50: f64 = line.split_whitespace().nth(2)?.parse().ok()?;
    Some(p50 * 1000.0)
}

pub fn scif(batch: u32, rounds: u32) -> Result<(), String> {
    let scif = Scif::new().map_err(e)?;
    let child_node = scif.node() + 4;
    let raw_path = format!("/dev/shm/remora-bench-scif-{}", std::process::id());
    let raw = super::common::raw_file(&raw_path, true)?;
    let (batch_s, rounds_s) = (batch.to_string(), rounds.to_string());
    let args = ["scif-child", "--raw-path", raw_path.as_str(), "--batch", &batch_s, "--rounds", &rounds_s];
    let (mut child, line) = spawn_responder(child_node, &args)?;
    // Both processes have the file mapped once the child answered (or the child failed):
    // its name goes now, so a run cut short leaves nothing in /dev/shm.
    let _ = std::fs::remove_file(&raw_path);
    let Ok(port) = line.parse::<u16>() else {
        let _ = child.kill();
        return Err(format!("responder failed to start: {line:?}"));
    };
    let result = parent(&scif, child_node, port, &raw, batch, rounds);
    let _ = child.wait();
    result?;
    rma_across_hosts()
}

/// `scif_writeto`/`scif_readfrom` of 16 MiB between endpoints of two nodes joined over TCP
/// on loopback (as between hosts), beside a raw TCP transfer of the same size (a steady
/// stream: see [`super::tcp::raw_tcp_bulk`]).
fn rma_across_hosts() -> Result<(), String> {
    const LEN: usize = 16 << 20;
    let pair = super::tcp::TcpPair::new()?;
    let (sa, sb) = (Scif::with_config(pair.a.config().clone()), Scif::with_config(pair.b.config().clone()));
    let l = Endpoint::open(&sb).map_err(e)?;
    let port = l.bind(0).map_err(e)?;
    l.listen(4).map_err(e)?;
    let t0 = Instant::now();
    while !sa.node_ids().map_err(e)?.contains(&8) {
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            return Err("the link between nodes 4 and 8 did not come up".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let c = Endpoint::open(&sa).map_err(e)?;
    let c2 = c.clone();
    let t = std::thread::spawn(move || c2.connect(PortId { node: 8, port }).map(|_| ()));
    let (s, _) = l.accept(true).map_err(e)?;
    t.join().map_err(|_| "connect thread")?.map_err(e)?;
    let soff = s.register(leak(LEN), 0, Prot::RW, true).map_err(e)?;
    let src = leak(LEN);
    src.write(0, &vec![0x3c; LEN]).map_err(e)?;
    let coff = c.register(src, 0, Prot::RW, true).map_err(e)?;
    let (mut w, mut r, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    // Nine rounds, each judged beside its own raw transfer (as `dma.rs` across hosts).
    for _ in 0..9 {
        let t = Instant::now();
        c.write_to(coff, LEN, soff, RmaFlags::default()).map_err(e)?;
        w.push(LEN as f64 / t.elapsed().as_secs_f64() / 1e9);
        let t = Instant::now();
        c.read_from(coff, LEN, soff, RmaFlags::default()).map_err(e)?;
        r.push(LEN as f64 / t.elapsed().as_secs_f64() / 1e9);
        raw.push(super::tcp::raw_tcp_bulk(LEN)?);
    }
    let (wr, rr) = (median_ratio(&w, &raw), median_ratio(&r, &raw));
    let (w, r, raw) = (median(&mut w), median(&mut r), median(&mut raw));
    row(
        "scif_writeto 16 MiB across hosts (TCP)",
        format!("{w:.2} GB/s"),
        format!("{raw:.2} GB/s"),
        wr,
        "≥ 0.80 (raw TCP, loopback)",
    );
    row(
        "scif_readfrom 16 MiB across hosts (TCP)",
        format!("{r:.2} GB/s"),
        format!("{raw:.2} GB/s"),
        rr,
        "≥ 0.80 (raw TCP, loopback)",
    );
    let stream = message_stream(&c, &s)?;
    let raw = super::tcp::raw_tcp_bulk(STREAM)?;
    let relayed = if remora_config::Config::get().scif_direct { "" } else { ", relayed" };
    row(
        &format!("scif_send→recv 16 MiB across hosts (TCP{relayed})"),
        format!("{stream:.2} GB/s"),
        format!("{raw:.2} GB/s"),
        stream / raw,
        "≥ 0.80 (raw TCP, loopback)",
    );
    let _ = (s.close(), c.close());
    Ok(())
}

/// The bytes of one message stream across hosts.
const STREAM: usize = 16 << 20;

/// [`STREAM`] bytes sent with blocking `scif_send`s of 64 KiB from `c` and taken with
/// blocking `scif_recv`s of 64 KiB on `s` (a thread of its own), the second of two passes
/// (the first warms the flow or relay): GB/s from the first send to the last byte taken.
fn message_stream(c: &Endpoint, s: &Endpoint) -> Result<f64, String> {
    const MSG: usize = 64 << 10;
    let data: Vec<u8> = (0..MSG).map(|i| (i % 251) as u8).collect();
    let mut gbs = 0.0;
    for _ in 0..2 {
        let rx = s.clone();
        let taker = std::thread::spawn(move || -> Result<Instant, String> {
            let mut buf = vec![0u8; MSG];
            for _ in 0..STREAM / MSG {
                match rx.recv(&mut buf, true) {
                    Ok(n) if n == MSG => {}
                    other => return Err(format!("scif_recv failed: {other:?}")),
                }
                if buf[MSG - 1] != ((MSG - 1) % 251) as u8 {
                    return Err("scif_recv: the message changed on its way".into());
                }
            }
            Ok(Instant::now())
        });
        let t = Instant::now();
        for _ in 0..STREAM / MSG {
            match c.send(&data, true) {
                Ok(n) if n == MSG => {}
                other => return Err(format!("scif_send failed: {other:?}")),
            }
        }
        let end = taker.join().map_err(|_| "receiving thread panicked")??;
        gbs = STREAM as f64 / end.duration_since(t).as_secs_f64() / 1e9;
    }
    Ok(gbs)
}

fn parent(
    scif: &std::sync::Arc<Scif>,
    node: u32,
    port: u16,
    raw: &remora_sys::Mapping,
    batch: u32,
    rounds: u32,
) -> Result<(), String> {
    let ep = Endpoint::open(scif).map_err(e)?;
    ep.connect(PortId { node, port }).map_err(e)?;
    let epd = &ep;
    get(epd)?;
    // 1. Messages.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..rounds as u64 {
        let base = r * batch as u64 * 4;
        let rout = raw.atomic_u64(0).ok_or("raw map")?;
        let rin = raw.atomic_u64(4096).ok_or("raw map")?;
        theirs.push(super::common::pingpong(rout, rin, base, batch)?);
        ours.push(scif_pingpong(epd, batch)?);
    }
    let (o, t) = (median(&mut ours), median(&mut theirs));
    header();
    row(
        "scif_send→recv 8 B one-way",
        format!("{o:.0} ns"),
        format!("{t:.0} ns"),
        o / t,
        "(raw shm ping-pong)",
    );
    // 2. RMA bandwidth.
    let src = leak(BIG);
    src.write(0, &vec![0x5a; BIG]).map_err(e)?;
    let loff = ep.register(src, BIG_OFF, Prot::RW, true).map_err(e)?;
    let plain = vec![0x5au8; BIG];
    let mut dst = vec![0u8; BIG];
    dst.copy_from_slice(&plain);
    ep.write_to(loff, BIG, BIG_OFF, RmaFlags::default()).map_err(e)?;
    let mut size = 64 << 10;
    while size <= BIG {
        let iters = ((256 << 20) / size).max(1);
        let (mut w, mut v, mut m) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..5 {
            let gb = |t: Instant| (size * iters) as f64 / t.elapsed().as_secs_f64() / 1e9;
            let t = Instant::now();
            for _ in 0..iters {
                std::hint::black_box(&mut dst[..size]).copy_from_slice(std::hint::black_box(&plain[..size]));
            }
            m.push(gb(t));
            let t = Instant::now();
            for _ in 0..iters {
                ep.write_to(loff, size, BIG_OFF, RmaFlags::default()).map_err(e)?;
            }
            w.push(gb(t));
            let t = Instant::now();
            for _ in 0..iters {
                ep.vwrite_to(std::hint::black_box(&plain[..size]), BIG_OFF, RmaFlags::default())
                    .map_err(e)?;
            }
            v.push(gb(t));
        }
        let (w, v, m) = (median(&mut w), median(&mut v), median(&mut m));
        let kib = size >> 10;
        row(
            &format!("scif_writeto {kib} KiB"),
            format!("{w:.2} GB/s"),
            format!("{m:.2} GB/s"),
            w / m,
            "≥ 0.90 (memcpy)",
        );
        row(
            &format!("scif_vwriteto {kib} KiB"),
            format!("{v:.2} GB/s"),
            format!("{m:.2} GB/s"),
            v / m,
            "≥ 0.90 (memcpy)",
        );
        size *= 16;
    }
    // 3. Stores through scif_mmap.
    let page = leak(4096);
    ep.register(page, PAGE_OFF, Prot::RW, true).map_err(e)?;
    msg(epd, 1)?;
    get(epd)?;
    let out = ep.map_peer(PAGE_OFF, 4096, Prot::RW).map_err(e)?;
    let inp = ep.map_own(PAGE_OFF, 4096, Prot::RW).map_err(e)?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..rounds as u64 {
        let base = (rounds as u64 + r) * batch as u64 * 4;
        let rout = raw.atomic_u64(0).ok_or("raw map")?;
        let rin = raw.atomic_u64(4096).ok_or("raw map")?;
        theirs.push(super::common::pingpong(rout, rin, base, batch)?);
        let (o, i) = (out.atomic_u64(0).ok_or("map")?, inp.atomic_u64(0).ok_or("map")?);
        ours.push(super::common::pingpong(o, i, base, batch)?);
    }
    let (o, t) = (median(&mut ours), median(&mut theirs));
    row(
        "scif_mmap store one-way",
        format!("{o:.0} ns"),
        format!("{t:.0} ns"),
        o / t,
        "≈ 1.00 (raw shm, = PIO)",
    );
    msg(epd, 2)?;
    // 4. UCX's ucx_perftest, alternating with our ping-pong so both see the same machine.
    let (mut ratios, mut o, mut u) = (Vec::new(), Vec::new(), Vec::new());
    let mut missing = false;
    const PAIRS: u32 = 7;
    for i in 0..PAIRS {
        // A warm-up batch first: the peer slept while UCX ran.
        scif_pingpong(epd, batch)?;
        let ours = scif_pingpong(epd, batch)?;
        msg(epd, 3)?;
        let Some(ucx) = ucx_tag_lat() else {
            missing = true;
            msg(epd, u64::MAX)?;
            break;
        };
        msg(epd, if i == PAIRS - 1 { u64::MAX } else { 4 })?;
        ratios.push(ours / ucx);
        o.push(ours);
        u.push(ucx);
    }
    if !missing {
        let (o, u, r) = (median(&mut o), median(&mut u), median(&mut ratios));
        row(
            "scif 8 B one-way vs UCX tag_lat",
            format!("{o:.0} ns"),
            format!("{u:.0} ns"),
            r,
            "≤ 1.00 (ucx_perftest shm)",
        );
    } else {
        println!("(ucx_perftest not found: apt-get install ucx-utils for the UCX reference)");
    }
    let _ = ep.close();
    let _ = out.atomic_u64(0).map(|a| a.load(Ordering::Relaxed));
    Ok(())
}

pub fn scif_child(raw_path: &str, batch: u32, rounds: u32) -> Result<(), String> {
    let scif = Scif::new().map_err(e)?;
    let raw = super::common::raw_file(raw_path, false)?;
    let l = Endpoint::open(&scif).map_err(e)?;
    let port = l.bind(0).map_err(e)?;
    l.listen(1).map_err(e)?;
    println!("ready {port}");
    std::io::stdout().flush().map_err(e)?;
    let (ep, _) = l.accept(true).map_err(e)?;
    let epd = &ep;
    let big = leak(BIG);
    ep.register(big, BIG_OFF, Prot::RW, true).map_err(e)?;
    let page = leak(4096);
    ep.register(page, PAGE_OFF, Prot::RW, true).map_err(e)?;
    msg(epd, 0)?;
    for r in 0..rounds as u64 {
        let base = r * batch as u64 * 4;
        super::common::echo(
            raw.atomic_u64(4096).ok_or("raw")?,
            raw.atomic_u64(0).ok_or("raw")?,
            base,
            batch,
        )?;
        scif_echo(epd, batch)?;
    }
    get(epd)?;
    let out = ep.map_peer(PAGE_OFF, 4096, Prot::RW).map_err(e)?;
    let inp = ep.map_own(PAGE_OFF, 4096, Prot::RW).map_err(e)?;
    msg(epd, 1)?;
    for r in 0..rounds as u64 {
        let base = (rounds as u64 + r) * batch as u64 * 4;
        super::common::echo(
            raw.atomic_u64(4096).ok_or("raw")?,
            raw.atomic_u64(0).ok_or("raw")?,
            base,
            batch,
        )?;
        let (o, i) = (out.atomic_u64(0).ok_or("map")?, inp.atomic_u64(0).ok_or("map")?);
        super::common::echo(o, i, base, batch)?;
    }
    get(epd)?;
    loop {
        scif_echo(epd, 2 * batch)?;
        // 3: the parent runs UCX now; then 4 (another batch) or MAX (done).
        let mut v = get(epd)?;
        if v == 3 {
            v = get(epd)?;
        }
        if v == u64::MAX {
            return Ok(());
        }
    }
}
