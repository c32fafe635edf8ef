//! `remora bench ofi`: the `ofi` transport (libfabric, provider `tcp;ofi_rxm`) between two
//! network-namespace hosts, beside Remora's own TCP transport between the same kind of
//! hosts, a raw TCP stream between the two namespaces, and libfabric's own `fi_pingpong`
//! for the same provider, all in the same run; medians of the repetitions.

use super::common::{e, header, median, row};
use remora_netns::NetCluster;
use remora_sisci::{
    CreateFlags, Descriptor, DmaFlags, DmaQueue, LocalSegment, MapFlags, RemoteSegment, Sisci,
};
use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LEN: usize = 16 << 20;
const PORT: u16 = 7390;

/// A DMA above the eager size of the ofi transport (32 KiB), where a transfer's own
/// set-up (round trips, registrations) weighs most.
const MID: usize = 64 << 10;

/// What one cluster measured: DMA push and pull of 16 MiB (GB/s), 8-byte DMA (µs), 64 KiB
/// DMA push and pull (µs), 4 KiB DMA pull and a DSM first touch of a page (µs), raw TCP
/// between its namespaces (GB/s).
struct Figures {
    push: f64,
    pull: f64,
    small_us: f64,
    mid_push_us: f64,
    mid_pull_us: f64,
    page_pull_us: f64,
    touch_us: f64,
    raw: f64,
}

/// A child that is killed when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` with stdout piped; wait for its `ready` line.
fn ready(mut cmd: Command) -> Result<(Reaped, std::io::BufReader<std::process::ChildStdout>), String> {
    let mut child = Reaped(cmd.stdout(Stdio::piped()).spawn().map_err(e)?);
    let out = child.0.stdout.take().ok_or("no stdout")?;
    let mut lines = std::io::BufReader::new(out);
    let mut line = String::new();
    lines.read_line(&mut line).map_err(e)?;
    match line.starts_with("ready") {
        true => Ok((child, lines)),
        false => Err(format!("helper did not start: {line:?}")),
    }
}

/// Raw TCP from host 2 to host 1 of `c`: `reps` streams of 16 MiB, each acknowledged.
fn raw_tcp(c: &NetCluster, reps: u32) -> Result<Vec<f64>, String> {
    let exe = std::env::current_exe().map_err(e)?;
    let at = format!("{}:{PORT}", c.addr(1));
    let mut sink = c.command(1, &exe);
    sink.args(["bench", "ofi-raw-sink", "--bind", &at]);
    let (_sink, _) = ready(sink)?;
    let mut source = c.command(2, &exe);
    source.args(["bench", "ofi-raw-source", "--to", &at, "--reps", &reps.to_string()]);
    let out = source.output().map_err(e)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text.lines().filter_map(|l| l.strip_prefix("gbs ")?.trim().parse().ok()).collect();
    match v.is_empty() {
        true => Err(format!("raw TCP source failed: {text} {}", String::from_utf8_lossy(&out.stderr))),
        false => Ok(v),
    }
}

/// `fi_pingpong` of 16 MiB over `tcp;ofi_rxm` from host 2 to host 1: its MB/s.
fn fi_pingpong(c: &NetCluster, iters: u32) -> Result<f64, String> {
    let args = ["-p", "tcp;ofi_rxm", "-e", "rdm", "-S", "16777216", "-I"];
    let mut server = c.command(1, "fi_pingpong");
    server.args(args).arg(iters.to_string()).args(["-B", "47611"]);
    let server = Reaped(server.stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(e)?);
    let t = Instant::now();
    loop {
        let mut client = c.command(2, "fi_pingpong");
        client.args(args).arg(iters.to_string()).args(["-P", "47611", c.addr(1)]);
        let out = client.output().map_err(e)?;
        let text = String::from_utf8_lossy(&out.stdout);
        // bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
        let got = text
            .lines()
            .filter(|l| l.starts_with("16m"))
            .find_map(|l| l.split_whitespace().nth(5)?.parse().ok());
        match got {
            Some(mbs) => {
                drop(server);
                return Ok(mbs);
            }
            None if t.elapsed() < Duration::from_secs(5) => std::thread::sleep(Duration::from_millis(200)),
            None => {
                return Err(format!("fi_pingpong failed: {text} {}", String::from_utf8_lossy(&out.stderr)))
            }
        }
    }
}

/// DMA across the two hosts of `c` (a process of host 2 pushes into and pulls from a
/// segment of host 1), interleaved with raw TCP between them.
fn measure(c: &NetCluster, reps: u32) -> Result<Figures, String> {
    let (s1, s2) = (Sisci::with_config(c.client_config(1)), Sisci::with_config(c.client_config(2)));
    let (d1, d2) = (Descriptor::open(&s1).map_err(e)?, Descriptor::open(&s2).map_err(e)?);
    let target = LocalSegment::create(&d1, None, LEN, CreateFlags::default()).map_err(e)?;
    target.prepare(0).map_err(e)?;
    target.set_available(0).map_err(e)?;
    let src = LocalSegment::create(&d2, None, LEN, CreateFlags::default()).map_err(e)?;
    src.prepare(0).map_err(e)?;
    let remote =
        RemoteSegment::connect(&d2, c.node(1), target.id(), 0, Some(Duration::from_secs(10))).map_err(e)?;
    let q = DmaQueue::create(&d2, 0, 16).map_err(e)?;
    let (write, read) = (DmaFlags { read: false, wait: true }, DmaFlags { read: true, wait: true });
    q.start(&src, &remote, 0, LEN, 0, write, None).map_err(e)?;
    let (mut w, mut r, mut raw, mut small) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut mid_w, mut mid_r, mut page_r, mut touch) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // A DSM map of the same segment: a first touch is one page read over the process's own
    // pager flow (a TCP stream to the home node, whatever the transport), the 4 KiB DMA
    // pull the same bytes through this node's daemon and the transport.
    let map = remote.map(0, LEN, None, MapFlags::default()).map_err(e)?;
    let mut page = 0usize;
    let mut b = [0u8; 1];
    for _ in 0..reps.max(3) {
        let t = Instant::now();
        q.start(&src, &remote, 0, LEN, 0, write, None).map_err(e)?;
        w.push(LEN as f64 / t.elapsed().as_secs_f64() / 1e9);
        let t = Instant::now();
        q.start(&src, &remote, 0, LEN, 0, read, None).map_err(e)?;
        r.push(LEN as f64 / t.elapsed().as_secs_f64() / 1e9);
        for _ in 0..50 {
            let t = Instant::now();
            q.start(&src, &remote, 0, 8, 0, write, None).map_err(e)?;
            small.push(t.elapsed().as_secs_f64() * 1e6);
        }
        for _ in 0..20 {
            let t = Instant::now();
            q.start(&src, &remote, 0, MID, 0, write, None).map_err(e)?;
            mid_w.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            q.start(&src, &remote, 0, MID, 0, read, None).map_err(e)?;
            mid_r.push(t.elapsed().as_secs_f64() * 1e6);
        }
        for _ in 0..20 {
            let t = Instant::now();
            q.start(&src, &remote, 0, 4096, 0, read, None).map_err(e)?;
            page_r.push(t.elapsed().as_secs_f64() * 1e6);
            // Every 16th page, so that no fault finds its page fetched already.
            page = (page + 16) % (LEN / 4096);
            let t = Instant::now();
            map.read(page * 4096, &mut b).map_err(e)?;
            touch.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    raw.extend(raw_tcp(c, reps.max(3))?);
    map.unmap().map_err(e)?;
    q.remove().map_err(e)?;
    Ok(Figures {
        push: median(&mut w),
        pull: median(&mut r),
        small_us: median(&mut small),
        mid_push_us: median(&mut mid_w),
        mid_pull_us: median(&mut mid_r),
        page_pull_us: median(&mut page_r),
        touch_us: median(&mut touch),
        raw: median(&mut raw),
    })
}

/// `remora bench ofi`.
pub(crate) fn ofi(reps: u32) -> Result<(), String> {
    if !remora_ofi_sys::installed() {
        return Err("libfabric is not installed (apt-get install libfabric1 libfabric-bin)".into());
    }
    let daemon = crate::daemon_binary()?;
    let start = |extra: &str| NetCluster::start_with(2, &daemon, extra).map_err(|s| s.0);
    let tcp = {
        let c = start("")?;
        measure(&c, reps)?
    };
    let (ofi, fpp) = {
        let c = start("transport = \"ofi+tcp\"\n")?;
        let f = measure(&c, reps)?;
        let p = fi_pingpong(&c, reps.max(3) * 2);
        (f, p)
    };
    let gbs = |x: f64| format!("{x:.2} GB/s");
    let us = |x: f64| format!("{x:.1} µs");
    header();
    let raw_t = "≥ 0.50 (raw TCP, netns)";
    row("DMA 16 MiB push, ofi+tcp", gbs(ofi.push), gbs(ofi.raw), ofi.push / ofi.raw, raw_t);
    row("DMA 16 MiB pull, ofi+tcp", gbs(ofi.pull), gbs(ofi.raw), ofi.pull / ofi.raw, raw_t);
    row("DMA 16 MiB push, tcp", gbs(tcp.push), gbs(tcp.raw), tcp.push / tcp.raw, raw_t);
    row("DMA 16 MiB pull, tcp", gbs(tcp.pull), gbs(tcp.raw), tcp.pull / tcp.raw, raw_t);
    row(
        "DMA push, ofi+tcp vs tcp",
        gbs(ofi.push),
        gbs(tcp.push),
        ofi.push / tcp.push,
        "reported (Remora tcp)",
    );
    row(
        "DMA pull, ofi+tcp vs tcp",
        gbs(ofi.pull),
        gbs(tcp.pull),
        ofi.pull / tcp.pull,
        "reported (Remora tcp)",
    );
    row(
        "DMA 8 B, ofi+tcp vs tcp",
        us(ofi.small_us),
        us(tcp.small_us),
        tcp.small_us / ofi.small_us,
        "reported (Remora tcp, speed)",
    );
    row(
        "DMA 64 KiB push, ofi+tcp vs tcp",
        us(ofi.mid_push_us),
        us(tcp.mid_push_us),
        tcp.mid_push_us / ofi.mid_push_us,
        "reported (Remora tcp, speed)",
    );
    row(
        "DMA 64 KiB pull, ofi+tcp vs tcp",
        us(ofi.mid_pull_us),
        us(tcp.mid_pull_us),
        tcp.mid_pull_us / ofi.mid_pull_us,
        "reported (Remora tcp, speed)",
    );
    row(
        "DSM first touch, ofi+tcp vs tcp",
        us(ofi.touch_us),
        us(tcp.touch_us),
        tcp.touch_us / ofi.touch_us,
        "reported (Remora tcp, speed)",
    );
    row(
        "DSM touch (TCP flow) vs fabric 4 KiB",
        us(ofi.touch_us),
        us(ofi.page_pull_us),
        ofi.page_pull_us / ofi.touch_us,
        "reported (DMA pull via daemon, speed)",
    );
    registrations(&ofi);
    match fpp {
        Ok(mbs) => {
            let p = mbs / 1e3;
            row(
                "fi_pingpong 16 MiB tcp;ofi_rxm",
                gbs(p),
                gbs(ofi.raw),
                p / ofi.raw,
                "reported (raw TCP, netns)",
            );
            row(
                "DMA push ofi+tcp vs fi_pingpong",
                gbs(ofi.push),
                gbs(p),
                ofi.push / p,
                "reported (fi_pingpong)",
            );
        }
        Err(err) => println!("fi_pingpong: not measured ({err})"),
    }
    Ok(())
}

/// Median µs of registering `len` bytes for remote writes with `tcp;ofi_rxm` and closing
/// the registration: what each transfer paid when the peer registered per transfer.
fn registration_us(len: usize) -> Result<f64, String> {
    let ep = remora_ofi_sys::Endpoint::open("tcp;ofi_rxm", Some("127.0.0.1"), 4, 4096).map_err(e)?;
    let fd = remora_sys::Memfd::create("bench-ofi-reg", len as u64).map_err(e)?;
    let map = std::sync::Arc::new(
        remora_sys::Mapping::new(remora_sys::AsFd::as_fd(&fd), 0, len, Default::default()).map_err(e)?,
    );
    let mut v = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        drop(ep.register(&map, 0, len, remora_ofi_sys::Access::RemoteWrite).map_err(e)?);
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(&mut v))
}

/// What registering a connection's memory once (not per transfer) saves, beside the
/// transfers it saves it on.
fn registrations(ofi: &Figures) {
    let us = |x: f64| format!("{x:.1} µs");
    match (registration_us(MID), registration_us(4 << 20)) {
        (Ok(mid), Ok(chunk)) => {
            row(
                "fi_mr_reg+close 64 KiB vs DMA",
                us(mid),
                us(ofi.mid_push_us),
                mid / ofi.mid_push_us,
                "reported (saved per transfer)",
            );
            let chunk_us = (4 << 20) as f64 / (ofi.push * 1e9) * 1e6;
            row(
                "fi_mr_reg+close 4 MiB vs chunk",
                us(chunk),
                us(chunk_us),
                chunk / chunk_us,
                "reported (saved per 4 MiB chunk)",
            );
        }
        (Err(err), _) | (_, Err(err)) => println!("registration cost: not measured ({err})"),
    }
}

/// Hidden `bench ofi-raw-sink`: take one connection at `bind`; for each 16 MiB that comes,
/// answer one byte.
pub(crate) fn raw_sink(bind: &str) -> Result<(), String> {
    let l = std::net::TcpListener::bind(bind).map_err(e)?;
    println!("ready");
    std::io::stdout().flush().map_err(e)?;
    let (mut s, _) = l.accept().map_err(e)?;
    crate::bench::common::like_links(&s);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let mut got = 0;
        while got < LEN {
            let n = s.read(&mut buf[..(LEN - got).min(1 << 20)]).map_err(e)?;
            if n == 0 {
                return Ok(());
            }
            got += n;
        }
        s.write_all(&[1]).map_err(e)?;
    }
}

/// Hidden `bench ofi-raw-source`: `reps` streams of 16 MiB to `to`, each until its byte
/// of acknowledgement; prints `gbs X` per stream.
pub(crate) fn raw_source(to: &str, reps: u32) -> Result<(), String> {
    let mut s = std::net::TcpStream::connect(to).map_err(e)?;
    let _ = s.set_nodelay(true);
    crate::bench::common::like_links(&s);
    let buf = vec![7u8; 1 << 20];
    let mut ack = [0u8; 1];
    for i in 0..=reps {
        let t = Instant::now();
        for _ in 0..LEN >> 20 {
            s.write_all(&buf).map_err(e)?;
        }
        s.read_exact(&mut ack).map_err(e)?;
        if i > 0 {
            // The first stream warms the connection up.
            println!("gbs {}", LEN as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
    }
    Ok(())
}
