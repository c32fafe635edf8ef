//! `dsm`: first touch, resident stores and ping-pongs through maps of another host's
//! memory, beside raw userfaultfd fills and raw TCP.

use super::common::*;
use super::tcp::*;
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, MapFlags, RemoteSegment, Sisci};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Raw userfaultfd fill of one page by a helper thread (no network): median nanoseconds.
pub(crate) fn raw_uffd_fill(pages: usize) -> Result<f64, String> {
    use remora_sys::uffd::Uffd;
    let u = std::sync::Arc::new(Uffd::new().map_err(e)?);
    let region = std::sync::Arc::new(u.register(pages * 4096, true).map_err(e)?);
    let (u2, r2) = (u.clone(), region.clone());
    let pager = std::thread::spawn(move || {
        let page = vec![1u8; 4096];
        let mut done = 0;
        while done < pages {
            let _ = remora_sys::poller::wait_readable(
                &[std::os::fd::AsFd::as_fd(&*u2)],
                Some(Duration::from_secs(5)),
            );
            while let Ok(Some(f)) = u2.next_fault() {
                let _ = u2.copy_page(&r2, f.addr, &page, false);
                done += 1;
            }
        }
    });
    let mut v = Vec::new();
    let mut b = [0u8; 1];
    for p in 0..pages {
        let t = Instant::now();
        region.read_at(p * 4096, &mut b).map_err(e)?;
        v.push(t.elapsed().as_nanos() as f64);
    }
    pager.join().map_err(|_| "pager thread")?;
    Ok(median(&mut v))
}

/// The child half of the DSM ping-pong: node 8 of the pair in `dir`; exports segment 3,
/// maps segment 1 of node 4, echoes every value it sees in its own segment.
pub(crate) fn dsm_child(
    dir: &std::path::Path,
    cluster: Option<std::path::PathBuf>,
    rounds: u32,
) -> Result<(), String> {
    let mut c = Sisci::initialize().map_err(e)?.config().clone();
    c.node = 8;
    c.runtime_dir = dir.to_path_buf();
    c.cluster = Some(cluster.unwrap_or_else(|| dir.join("cluster.toml")));
    let sci = Sisci::with_config(c);
    let dev = Descriptor::open(&sci).map_err(e)?;
    let seg = LocalSegment::create(&dev, Some(3), 4096, CreateFlags::default()).map_err(e)?;
    let lb = seg.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let to_a = RemoteSegment::connect(&dev, 4, 1, 0, Some(Duration::from_secs(10))).map_err(e)?;
    let ra = to_a.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    println!("ready");
    std::io::stdout().flush().map_err(e)?;
    ra.with_atomic(64, |out| {
        lb.with_atomic(64, |inp| -> Result<(), String> {
            super::common::fresh_looks();
            for i in 1..=rounds as u64 {
                wait_yielding(inp, i)?;
                out.store(i, Ordering::Release);
            }
            Ok(())
        })
    })
    .map_err(e)?
    .map_err(e)??;
    // Keep the segment until the parent has seen the last echo.
    std::thread::sleep(Duration::from_millis(100));
    Ok(())
}

/// The parent half of the DSM ping-pong: start the child (`cmd` with `bench dsm-child`
/// arguments added) as node 8, map its segment 3, ping through it and wait for the echo in
/// `la` (our segment 1). One-way times in ns.
pub(crate) fn maps_pingpong(
    da: &Descriptor,
    la: &remora_sisci::Map,
    mut cmd: Command,
    dir: &std::path::Path,
    cluster: Option<&std::path::Path>,
    rounds: u32,
) -> Result<Vec<f64>, String> {
    cmd.args(["bench", "dsm-child", "--dir"]).arg(dir).args(["--rounds", &rounds.to_string()]);
    if let Some(c) = cluster {
        cmd.arg("--cluster").arg(c);
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn().map_err(e)?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no child stdout")?).read_line(&mut line).map_err(e)?;
    if line.trim() != "ready" {
        let _ = child.kill();
        return Err(format!("responder failed to start: {line:?}"));
    }
    let to_child = RemoteSegment::connect(da, 8, 3, 0, Some(Duration::from_secs(10))).map_err(e)?;
    let rb = to_child.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    let mut v = Vec::new();
    let result = rb.with_atomic(64, |out| {
        la.with_atomic(64, |inp| -> Result<(), String> {
            super::common::fresh_looks();
            for i in 1..=rounds as u64 {
                let t = Instant::now();
                out.store(i, Ordering::Release);
                wait_yielding(inp, i)?;
                v.push(t.elapsed().as_nanos() as f64 / 2.0);
            }
            Ok(())
        })
    });
    let _ = child.wait();
    result.map_err(e)?.map_err(e)??;
    if remora_config::Config::get().bench_spread {
        spread(&v);
    }
    Ok(v)
}

/// With `REMORA_BENCH_SPREAD`: how the ping-pong's one-way times spread (a few trips of a
/// time slice or a tick, or every trip slow), on stderr.
fn spread(v: &[f64]) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let Some(&max) = s.last() else { return };
    let at = |q: f64| s[((s.len() - 1) as f64 * q) as usize] / 1e3;
    let over = |us: f64| s.iter().filter(|t| **t > us * 1e3).count();
    eprintln!(
        "ping-pong one-way µs: p10 {:.1} p50 {:.1} p90 {:.1} p99 {:.1} max {:.1}; \
         over 100 µs {}, over 1 ms {} of {}",
        at(0.1),
        at(0.5),
        at(0.9),
        at(0.99),
        max / 1e3,
        over(100.0),
        over(1000.0),
        s.len()
    );
}

/// The DSM ping-pong between two hosts of a namespace cluster (veth and a bridge between
/// them, as between machines), beside a raw TCP ping-pong between the same namespaces.
/// Needs root and iproute2; says why and returns otherwise.
pub(crate) fn dsm_across_hosts(rounds: u32) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(e)?;
    let c = match netns_hosts(2) {
        Ok(c) => c,
        Err(why) => {
            println!("(DSM across namespace hosts skipped: {why})");
            return Ok(());
        }
    };
    let cfg = |k: usize| c.client_config(k);
    let sa = Sisci::with_config(cfg(1));
    let da = Descriptor::open(&sa).map_err(e)?;
    let seg = LocalSegment::create(&da, Some(1), 4096, CreateFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let la = seg.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    // Raw TCP between the same two namespaces, before and after ours (the machine's speed
    // drifts).
    let raw_tcp_hosts = || -> Result<f64, String> {
        let n = 2000u32;
        let mut echo = c
            .command(2, &exe)
            .args(["bench", "tcp-echo", "--bind", &format!("{}:0", c.addr(2)), "--size", "8"])
            .args(["--rounds", &n.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(e)?;
        let mut port = String::new();
        BufReader::new(echo.stdout.take().ok_or("no echo stdout")?).read_line(&mut port).map_err(e)?;
        let out = c
            .command(1, &exe)
            .args(["bench", "tcp-ping", "--to", &format!("{}:{}", c.addr(2), port.trim()), "--size", "8"])
            .args(["--rounds", &n.to_string()])
            .output()
            .map_err(e)?;
        let _ = echo.wait();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("tcp-ping said {:?}", String::from_utf8_lossy(&out.stderr)))
    };
    let before = raw_tcp_hosts()?;
    let mut v =
        maps_pingpong(&da, &la, Command::new(&exe), c.runtime_dir(2), Some(c.cluster_file()), rounds)?;
    let ours = median(&mut v);
    let raw = (before + raw_tcp_hosts()?) / 2.0;
    row_us("DSM ping-pong one-way, across netns hosts", ours, raw, "≤ 3 (raw TCP ping-pong, same hosts)");
    Ok(())
}

pub(crate) fn dsm(rounds: u32) -> Result<(), String> {
    let pair = TcpPair::new()?;
    let da = Descriptor::open(&pair.a).map_err(e)?;
    let db = Descriptor::open(&pair.b).map_err(e)?;
    const PAGES: usize = 256;
    let seg_a = LocalSegment::create(&da, Some(1), PAGES * 4096, CreateFlags::default()).map_err(e)?;
    seg_a.prepare(0).map_err(e)?;
    seg_a.set_available(0).map_err(e)?;
    let to_a = RemoteSegment::connect(&db, 4, 1, 0, Some(Duration::from_secs(10))).map_err(e)?;
    header();

    // First touch of a remote page, in rounds alternating with the raw reference (the
    // machine's speed drifts: compare what ran side by side).
    let m = to_a.map(0, PAGES * 4096, None, MapFlags::default()).map_err(e)?;
    const ROUNDS: usize = 8;
    let per = PAGES / ROUNDS;
    let (mut ours_v, mut raw_v, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut b = [0u8; 1];
    for r in 0..ROUNDS {
        let mut v = Vec::new();
        for p in r * per..(r + 1) * per {
            let t = Instant::now();
            m.read(p * 4096, &mut b).map_err(e)?;
            v.push(t.elapsed().as_nanos() as f64);
        }
        let ours = median(&mut v);
        let (fill, rtt) = (raw_uffd_fill(per)?, 2.0 * raw_tcp(4096, 250)?);
        if remora_config::Config::get().bench_spread {
            eprintln!(
                "first touch {:.1} µs; uffd fill {:.1} µs + TCP round trip {:.1} µs",
                ours / 1e3,
                fill / 1e3,
                rtt / 1e3
            );
        }
        let raw = fill + rtt;
        ours_v.push(ours);
        raw_v.push(raw);
        ratios.push(ours / raw);
    }
    row(
        "DSM first touch of a remote page",
        format!("{:.1} µs", median(&mut ours_v) / 1e3),
        format!("{:.1} µs", median(&mut raw_v) / 1e3),
        median(&mut ratios),
        "≤ 2 (uffd fill + TCP round trip)",
    );

    // Stores to a resident page vs. plain memory.
    let n = 2_000_000u64;
    m.with_atomic(0, |w| w.store(0, Ordering::Relaxed)).map_err(e)?;
    let t = Instant::now();
    m.with_atomic(8, |w| {
        for i in 0..n {
            w.store(i, Ordering::Relaxed);
        }
    })
    .map_err(e)?;
    let ours = t.elapsed().as_nanos() as f64 / n as f64;
    let plain = AtomicU64::new(0);
    let t = Instant::now();
    for i in 0..n {
        std::hint::black_box(&plain).store(i, Ordering::Relaxed);
    }
    let raw = t.elapsed().as_nanos() as f64 / n as f64;
    row(
        "DSM store to a resident page",
        format!("{ours:.2} ns"),
        format!("{raw:.2} ns"),
        ours / raw,
        "memory speed (plain store)",
    );
    m.unmap().map_err(e)?;

    // Ping-pong through maps only, between this process (node 4) and a child process (node
    // 8), each spinning on its own segment like a PIO program, each with its own pager.
    let la = seg_a.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    let mut v =
        maps_pingpong(&da, &la, Command::new(std::env::current_exe().map_err(e)?), &pair.dir, None, rounds)?;
    let ours = median(&mut v);
    let raw = raw_tcp(8, 2000)?;
    let polling = raw_tcp_polling(8, 2000)?;
    row_us("DSM ping-pong one-way (maps only)", ours, raw, "≤ 3 (raw TCP ping-pong)");
    row_us("  the same, beside raw TCP polling (yielding)", ours, polling, "reported");
    drop(pair);
    one_core_row(rounds)?;
    dsm_across_hosts(rounds)
}

/// The loopback ping-pong again with every thread of it on one core — both processes, their
/// pagers and both daemons, all started by a child process pinned to this thread's first
/// CPU — beside raw TCP on that core: the path's own cost, apart from where the scheduler
/// puts four spinning threads and two daemons on two cores (the unpinned row is bimodal,
/// 7 to 80 µs). Left out where this thread may not be pinned.
fn one_core_row(rounds: u32) -> Result<(), String> {
    let out = {
        let Ok(_pin) = remora_sys::sync::pin_thread() else { return Ok(()) };
        Command::new(std::env::current_exe().map_err(e)?)
            .args(["bench", "dsm-one-core", "--rounds", &rounds.to_string()])
            .stderr(Stdio::inherit())
            .output()
            .map_err(e)?
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let got: Vec<f64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [ours, raw] = got[..] else {
        return Err(format!("dsm-one-core said {text:?} ({})", out.status));
    };
    row_us(
        "DSM ping-pong one-way (maps only), one core",
        ours,
        raw,
        "reported (raw TCP ping-pong, one core)",
    );
    Ok(())
}

/// The body of `bench dsm-one-core` (its process runs pinned, and so does everything it
/// starts): the loopback ping-pong's median and raw TCP's, in ns, on one line.
pub(crate) fn dsm_one_core(rounds: u32) -> Result<(), String> {
    let pair = TcpPair::new()?;
    let da = Descriptor::open(&pair.a).map_err(e)?;
    let seg_a = LocalSegment::create(&da, Some(1), 4096, CreateFlags::default()).map_err(e)?;
    seg_a.prepare(0).map_err(e)?;
    seg_a.set_available(0).map_err(e)?;
    let la = seg_a.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    let mut v =
        maps_pingpong(&da, &la, Command::new(std::env::current_exe().map_err(e)?), &pair.dir, None, rounds)?;
    let ours = median(&mut v);
    let raw = raw_tcp(8, 2000)?;
    println!("{ours} {raw}");
    Ok(())
}
