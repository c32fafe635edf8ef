//! `remora bench`: each Remora path beside its raw reference, in the same run, with ratios.
//!
//! * `pio`: one-way latency of a store into a mapped segment of another node of this host,
//!   seen by a polling peer (half a ping-pong round trip), beside the same ping-pong over a
//!   raw shared-memory file.
//! * `memcpy`: `SCIMemCpy` bandwidth into a mapped segment of another node beside `memcpy`
//!   between two buffers of the same size.
//! * `connect`: connect plus map of a segment of another node of this host.

use clap::Subcommand;
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, MapFlags, RemoteSegment, Sisci};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Which benchmark.
#[derive(Subcommand, Debug)]
pub enum Which {
    /// Store-to-observe latency through a mapped segment of another node.
    Pio {
        /// Round trips per measured batch.
        #[arg(long, default_value_t = 2000)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 15)]
        rounds: u32,
    },
    /// SCIMemCpy bandwidth beside memcpy, 64 KiB to 64 MiB.
    Memcpy {
        /// Repetitions per size.
        #[arg(long, default_value_t = 9)]
        reps: u32,
    },
    /// Connect + map latency of a segment of another node on this host.
    Connect {
        /// Samples.
        #[arg(long, default_value_t = 300)]
        samples: u32,
    },
    /// Interrupt trigger-to-wake latency between two processes, blocking and spinning.
    Intr {
        /// Round trips per blocking batch.
        #[arg(long, default_value_t = 200)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
    },
    /// DMA bandwidth (64 KiB to 64 MiB) beside memcpy, and 8-byte post-to-completion latency.
    Dma {
        /// Repetitions per size.
        #[arg(long, default_value_t = 7)]
        reps: u32,
    },
    /// DSM across hosts (TCP on loopback): first touch, ping-pong through maps, stores to
    /// resident pages, each beside its raw reference.
    Dsm {
        /// Round trips for the ping-pong.
        #[arg(long, default_value_t = 300)]
        rounds: u32,
    },
    /// SCIF between two nodes of this host: 8-byte message latency (beside raw shared
    /// memory and UCX's `ucx_perftest`), RMA bandwidth beside memcpy, scif_mmap stores.
    Scif {
        /// Round trips per measured batch.
        #[arg(long, default_value_t = 20000)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 11)]
        rounds: u32,
    },
    /// All of the above with their defaults.
    All,
    /// The responder half of `scif` (started by `scif` itself).
    #[command(hide = true)]
    ScifChild {
        #[arg(long)]
        raw_path: String,
        #[arg(long)]
        batch: u32,
        #[arg(long)]
        rounds: u32,
    },
    /// The responder half of `intr` (started by `intr` itself).
    #[command(hide = true)]
    IntrChild {
        #[arg(long)]
        raw_path: String,
        #[arg(long)]
        peer_node: u32,
        #[arg(long)]
        batch: u32,
        #[arg(long)]
        rounds: u32,
    },
    /// The responder half of `dsm`'s ping-pong (started by `dsm` itself).
    #[command(hide = true)]
    DsmChild {
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The cluster file (default: `cluster.toml` in `dir`).
        #[arg(long)]
        cluster: Option<std::path::PathBuf>,
        #[arg(long)]
        rounds: u32,
    },
    /// Raw TCP echo for the across-hosts reference (started by `dsm` in a namespace).
    #[command(hide = true)]
    TcpEcho {
        #[arg(long)]
        bind: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        rounds: u32,
    },
    /// Raw TCP ping for the across-hosts reference: prints the median one-way in ns.
    #[command(hide = true)]
    TcpPing {
        #[arg(long)]
        to: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        rounds: u32,
    },
    /// The responder half of `pio` (started by `pio` itself).
    #[command(hide = true)]
    PioChild {
        #[arg(long)]
        raw_path: String,
        #[arg(long)]
        peer_node: u32,
        #[arg(long)]
        peer_seg: u32,
        #[arg(long)]
        own_seg: u32,
        #[arg(long)]
        batch: u32,
        #[arg(long)]
        rounds: u32,
    },
}

pub fn run(w: Which) -> Result<(), String> {
    match w {
        Which::Pio { batch, rounds } => pio(batch, rounds),
        Which::Memcpy { reps } => memcpy(reps),
        Which::Connect { samples } => connect(samples),
        Which::Intr { batch, rounds } => intr(batch, rounds),
        Which::Dma { reps } => dma(reps),
        Which::Dsm { rounds } => dsm(rounds),
        Which::Scif { batch, rounds } => crate::bench_scif::scif(batch, rounds),
        Which::ScifChild { raw_path, batch, rounds } => {
            crate::bench_scif::scif_child(&raw_path, batch, rounds)
        }
        Which::All => {
            pio(2000, 15)?;
            memcpy(9)?;
            connect(300)?;
            intr(200, 9)?;
            dma(7)?;
            dsm(300)?;
            crate::bench_scif::scif(20000, 11)
        }
        Which::IntrChild { raw_path, peer_node, batch, rounds } => {
            intr_child(&raw_path, peer_node, batch, rounds)
        }
        Which::PioChild { raw_path, peer_node, peer_seg, own_seg, batch, rounds } => {
            pio_child(&raw_path, peer_node, peer_seg, own_seg, batch, rounds)
        }
        Which::DsmChild { dir, cluster, rounds } => dsm_child(&dir, cluster, rounds),
        Which::TcpEcho { bind, size, rounds } => tcp_echo(&bind, size, rounds),
        Which::TcpPing { to, size, rounds } => tcp_ping(&to, size, rounds),
    }
}

pub(crate) fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

pub(crate) fn header() {
    println!("{:<34} {:>14} {:>14} {:>8}  target", "measure", "remora", "reference", "ratio");
}

pub(crate) fn row(name: &str, ours: String, theirs: String, ratio: f64, target: &str) {
    println!("{name:<34} {ours:>14} {theirs:>14} {ratio:>8.2}  {target}");
}

/// The two nodes a benchmark uses: this process's node and the next one (node + 4).
fn nodes() -> Result<(Sisci, Sisci), String> {
    let a = Sisci::initialize().map_err(e)?;
    let mut cfg = a.config().clone();
    cfg.node = a.local_node_id() + 4;
    Ok((a.clone(), Sisci::with_config(cfg)))
}

/// Spin until `word` holds `want`; gives up (Err) after 10 s so a dead peer cannot hang us.
fn wait_for(word: &AtomicU64, want: u64) -> Result<(), String> {
    let mut spins = 0u64;
    let mut since = None;
    while word.load(Ordering::Acquire) != want {
        spins += 1;
        if spins.is_multiple_of(1 << 20) {
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > Duration::from_secs(10) {
                return Err("peer stopped answering".into());
            }
        }
    }
    Ok(())
}

/// Like [`wait_for`], but yields the core between looks: on this machine both "hosts" share
/// two cores, and a pure spinner on each would leave none for the threads that move data
/// between them (on two real hosts each has cores of its own).
fn wait_yielding(word: &AtomicU64, want: u64) -> Result<(), String> {
    if remora_config::Config::get().bench_spin {
        return wait_for(word, want);
    }
    let t = Instant::now();
    while word.load(Ordering::Acquire) != want {
        if t.elapsed() > Duration::from_secs(10) {
            return Err("peer stopped answering".into());
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// One batch of ping-pongs: we store `i` into `out` and wait for the peer to echo it into
/// `inp`. Returns nanoseconds per one-way trip.
pub(crate) fn pingpong(out: &AtomicU64, inp: &AtomicU64, base: u64, n: u32) -> Result<f64, String> {
    let t = Instant::now();
    for i in 1..=n as u64 {
        out.store(base + i, Ordering::Release);
        wait_for(inp, base + i)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / (2.0 * n as f64))
}

/// The echo side: wait for `i` in `inp`, store it into `out`.
pub(crate) fn echo(out: &AtomicU64, inp: &AtomicU64, base: u64, n: u32) -> Result<(), String> {
    for i in 1..=n as u64 {
        wait_for(inp, base + i)?;
        out.store(base + i, Ordering::Release);
    }
    Ok(())
}

pub(crate) fn raw_file(path: &str, create: bool) -> Result<remora_sys::Mapping, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
        .map_err(e)?;
    if create {
        f.set_len(8192).map_err(e)?;
    }
    remora_sys::Mapping::new(std::os::fd::AsFd::as_fd(&f), 0, 8192, Default::default()).map_err(e)
}

const PARENT_SEG: u32 = 0x7e00_0001;
const CHILD_SEG: u32 = 0x7e00_0002;

fn pio(batch: u32, rounds: u32) -> Result<(), String> {
    let (a, b) = nodes()?;
    let raw_path = format!("/dev/shm/remora-bench-{}", std::process::id());
    let raw = raw_file(&raw_path, true)?;
    let dev = Descriptor::open(&a).map_err(e)?;
    let seg = LocalSegment::create(&dev, Some(PARENT_SEG), 4096, CreateFlags::default()).map_err(e)?;
    let local = seg.map(0, 4096, None, MapFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let exe = std::env::current_exe().map_err(e)?;
    let mut child = Command::new(exe)
        .env("REMORA_NODE", b.local_node_id().to_string())
        .args(["bench", "pio-child", "--raw-path", &raw_path])
        .args(["--peer-node", &a.local_node_id().to_string()])
        .args(["--peer-seg", &PARENT_SEG.to_string(), "--own-seg", &CHILD_SEG.to_string()])
        .args(["--batch", &batch.to_string(), "--rounds", &rounds.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(e)?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no child stdout")?).read_line(&mut line).map_err(e)?;
    if line.trim() != "ready" {
        let _ = child.kill();
        return Err(format!("responder failed to start: {line:?}"));
    }
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

fn pio_child(
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

fn memcpy(reps: u32) -> Result<(), String> {
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

fn connect(samples: u32) -> Result<(), String> {
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

// ---------------------------------------------------------------------------------------
// Interrupts

const PARENT_INTNO: u32 = 0x7e01;
const CHILD_INTNO: u32 = 0x7e02;
const SPIN_BATCH_FACTOR: u32 = 20;

/// Raw reference: a futex word per direction in a shared file. `spin` zero blocks at once.
struct RawPair<'a> {
    out: &'a std::sync::atomic::AtomicU32,
    out_waiters: &'a std::sync::atomic::AtomicU32,
    inp: &'a std::sync::atomic::AtomicU32,
    inp_waiters: &'a std::sync::atomic::AtomicU32,
}

impl RawPair<'_> {
    fn signal(&self) {
        self.out.fetch_add(1, Ordering::SeqCst);
        if self.out_waiters.load(Ordering::SeqCst) > 0 {
            remora_sys::sync::futex_wake_all(self.out);
        }
    }

    fn wait(&self, seen: &mut u32, spin: Duration) -> Result<(), String> {
        let r = remora_sys::sync::spin_then_block(
            self.inp,
            self.inp_waiters,
            spin,
            Some(Duration::from_secs(10)),
            || self.inp.load(Ordering::SeqCst) != *seen,
        );
        *seen = self.inp.load(Ordering::SeqCst);
        match r {
            remora_sys::sync::WaitOutcome::Ready => Ok(()),
            remora_sys::sync::WaitOutcome::TimedOut => Err("raw peer stopped answering".into()),
        }
    }
}

fn raw_pair(m: &remora_sys::Mapping, parent: bool) -> Result<RawPair<'_>, String> {
    let w = |o| m.atomic_u32(o).ok_or("raw map");
    let (a, aw, b, bw) = (w(0)?, w(4)?, w(64)?, w(68)?);
    Ok(if parent {
        RawPair { out: a, out_waiters: aw, inp: b, inp_waiters: bw }
    } else {
        RawPair { out: b, out_waiters: bw, inp: a, inp_waiters: aw }
    })
}

fn intr(batch: u32, rounds: u32) -> Result<(), String> {
    let (a, b) = nodes()?;
    let raw_path = format!("/dev/shm/remora-bench-intr-{}", std::process::id());
    let raw = raw_file(&raw_path, true)?;
    let dev = Descriptor::open(&a).map_err(e)?;
    let mine = remora_sisci::Interrupt::create(&dev, 0, Some(PARENT_INTNO), true, None).map_err(e)?;
    let exe = std::env::current_exe().map_err(e)?;
    let mut child = Command::new(exe)
        .env("REMORA_NODE", b.local_node_id().to_string())
        .args(["bench", "intr-child", "--raw-path", &raw_path])
        .args(["--peer-node", &a.local_node_id().to_string()])
        .args(["--batch", &batch.to_string(), "--rounds", &rounds.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(e)?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no child stdout")?).read_line(&mut line).map_err(e)?;
    if line.trim() != "ready" {
        let _ = child.kill();
        return Err(format!("responder failed to start: {line:?}"));
    }
    let theirs = remora_sisci::RemoteInterrupt::connect(
        &dev,
        b.local_node_id(),
        0,
        CHILD_INTNO,
        Some(Duration::from_secs(10)),
    )
    .map_err(e)?;
    let pair = raw_pair(&raw, true)?;
    let (mut rb, mut ob, mut rs, mut os) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let spin = remora_sys::sync::DEFAULT_SPIN;
    let mut seen = 0u32;
    let result = (|| -> Result<(), String> {
        for _ in 0..rounds {
            for (mode_spin, n, raw_out, ours_out) in [
                (Duration::ZERO, batch, &mut rb, &mut ob),
                (spin, batch * SPIN_BATCH_FACTOR, &mut rs, &mut os),
            ] {
                let t = Instant::now();
                for _ in 0..n {
                    pair.signal();
                    pair.wait(&mut seen, mode_spin)?;
                }
                raw_out.push(t.elapsed().as_nanos() as f64 / (2.0 * n as f64));
                let t = Instant::now();
                for _ in 0..n {
                    theirs.trigger().map_err(e)?;
                    mine.wait_with_spin(Some(Duration::from_secs(10)), mode_spin).map_err(e)?;
                }
                ours_out.push(t.elapsed().as_nanos() as f64 / (2.0 * n as f64));
            }
        }
        Ok(())
    })();
    let _ = child.wait();
    let _ = std::fs::remove_file(&raw_path);
    result?;
    header();
    let (o, t) = (median(&mut ob), median(&mut rb));
    row(
        "interrupt wake, waiter blocked",
        format!("{:.1} µs", o / 1e3),
        format!("{:.1} µs", t / 1e3),
        o / t,
        "≤ 1.20 (raw futex)",
    );
    let (o, t) = (median(&mut os), median(&mut rs));
    row(
        "interrupt wake, waiter spinning",
        format!("{o:.0} ns"),
        format!("{t:.0} ns"),
        o / t,
        "≤ 1 µs (raw spin-then-block)",
    );
    Ok(())
}

fn intr_child(raw_path: &str, peer_node: u32, batch: u32, rounds: u32) -> Result<(), String> {
    let sci = Sisci::initialize().map_err(e)?;
    let raw = raw_file(raw_path, false)?;
    let dev = Descriptor::open(&sci).map_err(e)?;
    let mine = remora_sisci::Interrupt::create(&dev, 0, Some(CHILD_INTNO), true, None).map_err(e)?;
    let theirs = remora_sisci::RemoteInterrupt::connect(
        &dev,
        peer_node,
        0,
        PARENT_INTNO,
        Some(Duration::from_secs(10)),
    )
    .map_err(e)?;
    println!("ready");
    std::io::stdout().flush().map_err(e)?;
    let pair = raw_pair(&raw, false)?;
    let spin = remora_sys::sync::DEFAULT_SPIN;
    let mut seen = 0u32;
    for _ in 0..rounds {
        for (mode_spin, n) in [(Duration::ZERO, batch), (spin, batch * SPIN_BATCH_FACTOR)] {
            for _ in 0..n {
                pair.wait(&mut seen, mode_spin)?;
                pair.signal();
            }
            for _ in 0..n {
                mine.wait_with_spin(Some(Duration::from_secs(10)), mode_spin).map_err(e)?;
                theirs.trigger().map_err(e)?;
            }
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// DMA

fn dma(reps: u32) -> Result<(), String> {
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
    Ok(())
}

// ---------------------------------------------------------------------------------------
// DSM

/// Two nodes of this host joined over TCP on loopback (as if on two hosts), in a private
/// runtime directory; daemons are started by the library and stopped at the end.
pub(crate) struct TcpPair {
    dir: std::path::PathBuf,
    pub(crate) a: Sisci,
    pub(crate) b: Sisci,
}

impl TcpPair {
    pub(crate) fn new() -> Result<TcpPair, String> {
        let dir = std::env::temp_dir().join(format!("remora-bench-dsm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(e)?;
        let port =
            || std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port());
        let (p4, p8) = (port().map_err(e)?, port().map_err(e)?);
        let text = format!(
            "secret = \"remora-bench-secret-0123456789\"\nforce_tcp = true\n[[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = {p4}\n[[node]]\nid = 8\nhost = \"127.0.0.1\"\nport = {p8}\n"
        );
        let file = dir.join("cluster.toml");
        std::fs::write(&file, text).map_err(e)?;
        let base = Sisci::initialize().map_err(e)?.config().clone();
        let mk = |node| {
            let mut c = base.clone();
            c.node = node;
            c.runtime_dir = dir.clone();
            c.cluster = Some(file.clone());
            Sisci::with_config(c)
        };
        Ok(TcpPair { a: mk(4), b: mk(8), dir })
    }
}

impl Drop for TcpPair {
    fn drop(&mut self) {
        for n in [4, 8] {
            if let Ok(s) = remora_client::Session::open_control(&self.a.config().with_node(n)) {
                let _ = s.request(remora_proto::Request::Shutdown, &[]);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Raw TCP ping-pong on loopback between two threads: median one-way time of `size`-byte
/// messages, and (for page-sized ones) the round trip.
fn raw_tcp(size: usize, rounds: u32) -> Result<f64, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(e)?;
    let addr = l.local_addr().map_err(e)?;
    let echo = std::thread::spawn(move || echo_loop(l.accept()?.0, size, rounds));
    let out = ping_loop(std::net::TcpStream::connect(addr).map_err(e)?, size, rounds)?;
    echo.join().map_err(|_| "echo thread")?.map_err(e)?;
    Ok(out)
}

/// Echo `rounds` messages of `size` bytes back on `s`.
fn echo_loop(mut s: std::net::TcpStream, size: usize, rounds: u32) -> std::io::Result<()> {
    use std::io::{Read as _, Write as _};
    s.set_nodelay(true)?;
    let mut buf = vec![0u8; size];
    for _ in 0..rounds {
        s.read_exact(&mut buf)?;
        s.write_all(&buf)?;
    }
    Ok(())
}

/// Send `rounds` messages of `size` bytes on `s`, each answered before the next: the median
/// one-way time in ns.
fn ping_loop(mut s: std::net::TcpStream, size: usize, rounds: u32) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    s.set_nodelay(true).map_err(e)?;
    let mut buf = vec![0u8; size];
    let mut v = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        s.write_all(&buf).map_err(e)?;
        s.read_exact(&mut buf).map_err(e)?;
        v.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    Ok(median(&mut v))
}

/// Raw TCP ping-pong on loopback between two processes' worth of threads that poll their
/// sockets without blocking, yielding between looks (the mode of the DSM ping-pong's
/// pollers): median one-way time of `size`-byte messages.
fn raw_tcp_polling(size: usize, rounds: u32) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    fn read_polling(s: &mut std::net::TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
        let mut got = 0;
        let t = Instant::now();
        while got < buf.len() {
            match s.read(&mut buf[got..]) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if t.elapsed() > Duration::from_secs(10) {
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(e)?;
    let addr = l.local_addr().map_err(e)?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = l.accept()?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        let mut buf = vec![0u8; size];
        for _ in 0..rounds {
            read_polling(&mut s, &mut buf)?;
            s.write_all(&buf)?;
        }
        Ok(())
    });
    let mut s = std::net::TcpStream::connect(addr).map_err(e)?;
    s.set_nodelay(true).map_err(e)?;
    s.set_nonblocking(true).map_err(e)?;
    let mut buf = vec![0u8; size];
    let mut v = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        s.write_all(&buf).map_err(e)?;
        read_polling(&mut s, &mut buf).map_err(e)?;
        v.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    echo.join().map_err(|_| "echo thread")?.map_err(e)?;
    Ok(median(&mut v))
}

/// Raw userfaultfd fill of one page by a helper thread (no network): median nanoseconds.
fn raw_uffd_fill(pages: usize) -> Result<f64, String> {
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
fn dsm_child(dir: &std::path::Path, cluster: Option<std::path::PathBuf>, rounds: u32) -> Result<(), String> {
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
fn maps_pingpong(
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
    Ok(v)
}

/// The echo half of the raw TCP reference across hosts: bind `bind`, print the port, echo
/// `rounds` messages of `size` bytes.
fn tcp_echo(bind: &str, size: usize, rounds: u32) -> Result<(), String> {
    use std::io::Write as _;
    let l = std::net::TcpListener::bind(bind).map_err(e)?;
    println!("{}", l.local_addr().map_err(e)?.port());
    std::io::stdout().flush().map_err(e)?;
    echo_loop(l.accept().map_err(e)?.0, size, rounds).map_err(e)
}

/// The ping half of the raw TCP reference across hosts: prints the median one-way in ns.
fn tcp_ping(to: &str, size: usize, rounds: u32) -> Result<(), String> {
    println!("{}", ping_loop(std::net::TcpStream::connect(to).map_err(e)?, size, rounds)?);
    Ok(())
}

/// The DSM ping-pong between two hosts of a namespace cluster (veth and a bridge between
/// them, as between machines), beside a raw TCP ping-pong between the same namespaces.
/// Needs root and iproute2; says why and returns otherwise.
fn dsm_across_hosts(rounds: u32) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(e)?;
    let daemon = exe.parent().map(|d| d.join("remorad")).ok_or("no directory")?;
    let c = match remora_netns::NetCluster::start(2, &daemon) {
        Ok(c) => c,
        Err(skip) => {
            println!("(DSM across namespace hosts skipped: {})", skip.0);
            return Ok(());
        }
    };
    let cfg = |k: usize| remora_client::Config {
        node: c.node(k),
        runtime_dir: c.runtime_dir(k).to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(30),
        cluster: Some(c.cluster_file().to_path_buf()),
    };
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
    row(
        "DSM ping-pong one-way, across netns hosts",
        format!("{:.1} µs", ours / 1e3),
        format!("{:.1} µs", raw / 1e3),
        ours / raw,
        "≤ 3 (raw TCP ping-pong, same hosts)",
    );
    Ok(())
}

fn dsm(rounds: u32) -> Result<(), String> {
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
    row(
        "DSM ping-pong one-way (maps only)",
        format!("{:.1} µs", ours / 1e3),
        format!("{:.1} µs", raw / 1e3),
        ours / raw,
        "≤ 3 (raw TCP ping-pong)",
    );
    row(
        "  the same, beside raw TCP polling (yielding)",
        format!("{:.1} µs", ours / 1e3),
        format!("{:.1} µs", polling / 1e3),
        ours / polling,
        "reported",
    );
    drop(pair);
    dsm_across_hosts(rounds)
}
