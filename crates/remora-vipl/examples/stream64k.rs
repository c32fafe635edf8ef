//! A profiling driver for issue 15: only the one-host 64 KiB stream of `remora bench vipl`
//! (`send`, `rdma`), its bare shared-memory hand-over (`raw`, `rawrdma`) or `memcpy` over
//! the same buffers, in rounds of 512 messages for a few seconds, so that `perf record`
//! sees nothing else: `cargo run --release -p remora-vipl --example stream64k -- send 5`
//! (mode, seconds); it starts the nodes of this host it needs (`REMORA_DAEMON` names
//! `remorad`). Prints the rounds' median, mean and best; `SLOW=1` also prints every round
//! under 20 GB/s, `WATCH_US` sets the NICs' watcher period. On a machine others use, give
//! it a `REMORA_RUNTIME_DIR` of its own (its nodes are those of that directory) and
//! `REMORA_IDLE_EXIT=1`.

#[allow(dead_code)]
mod common;

use common::{pair, DEPTH, SLOT as KIB64, SOURCES};
use remora_vipl::layout::control;
use remora_vipl::{DataSegment, Descriptor, Error};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

#[repr(align(128))]
struct Count(AtomicU64);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("send").to_string();
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5.0);
    if !["send", "rdma", "raw", "rawrdma", "memcpy"].contains(&mode.as_str()) || secs.is_nan() || secs <= 0.0
    {
        eprintln!("usage: stream64k [send|rdma|raw|rawrdma|memcpy] [seconds > 0]");
        std::process::exit(2);
    }
    let (sa, sb) = pair(|_| ());
    for i in 0..DEPTH {
        let d = Descriptor { length: KIB64 as u32, segments: vec![sb.seg(i, KIB64)], ..Default::default() };
        sb.nic.write_descriptor(sb.d(i), sb.dh, &d).unwrap();
        sb.vi.post_recv(sb.d(i), sb.dh).unwrap();
    }
    sa.nic.set_transfer_mode(remora_vipl::ViplTransfer::Copy);
    if let Ok(us) = std::env::var("WATCH_US") {
        let p = Duration::from_micros(us.parse().unwrap());
        sa.nic.set_watch_period(p);
        sb.nic.set_watch_period(p);
    }
    let rdma = mode == "rdma";
    let remote = DataSegment { addr: sb.buf.addr() as u64, handle: sb.bh, len: 0 };
    for s in 0..SOURCES {
        let (control, segs) = if rdma {
            (control::OP_RDMAWRITE | control::IMMEDIATE, vec![remote, sa.seg(DEPTH + s, KIB64)])
        } else {
            (0, vec![sa.seg(DEPTH + s, KIB64)])
        };
        let d = Descriptor { control, length: KIB64 as u32, segments: segs, ..Default::default() };
        sa.nic.write_descriptor(sa.d(DEPTH + s), sa.dh, &d).unwrap();
    }
    let n = 512usize;
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let (mut rounds, mut total) = (0u32, 0f64);
    let mut best = 0f64;
    let mut all = Vec::new();
    while Instant::now() < end {
        let go = Barrier::new(2);
        let (sent, freed) = (Count(AtomicU64::new(0)), Count(AtomicU64::new(0)));
        let gbs = std::thread::scope(|sc| {
            if mode == "raw" || mode == "rawrdma" {
                let rx = sc.spawn(|| {
                    go.wait();
                    for i in 0..n as u64 {
                        while sent.0.load(Ordering::Acquire) < i + 1 {}
                        freed.0.store(i + 1, Ordering::Release);
                    }
                    Instant::now()
                });
                go.wait();
                let t = Instant::now();
                for i in 0..n {
                    while freed.0.load(Ordering::Acquire) < (i + 1).saturating_sub(DEPTH) as u64 {}
                    let dst = if mode == "rawrdma" { 0 } else { (i % DEPTH) * KIB64 };
                    sb.buf.copy_from(dst, &sa.buf, (DEPTH + i % SOURCES) * KIB64, KIB64).unwrap();
                    sent.0.store(i as u64 + 1, Ordering::Release);
                }
                let e = rx.join().unwrap();
                n as f64 * KIB64 as f64 / e.duration_since(t).as_secs_f64() / 1e9
            } else if mode == "memcpy" {
                let t = Instant::now();
                for i in 0..n {
                    sb.buf
                        .copy_from((i % DEPTH) * KIB64, &sa.buf, (DEPTH + i % SOURCES) * KIB64, KIB64)
                        .unwrap();
                }
                n as f64 * KIB64 as f64 / t.elapsed().as_secs_f64() / 1e9
            } else {
                let rx = sc.spawn(|| {
                    go.wait();
                    for _ in 0..n {
                        loop {
                            match sb.vi.recv_done() {
                                Ok((addr, _)) => {
                                    sb.vi.post_recv(addr, sb.dh).unwrap();
                                    break;
                                }
                                Err(Error::NotDone) => {}
                                Err(x) => panic!("{x:?}"),
                            }
                        }
                    }
                    Instant::now()
                });
                go.wait();
                let t = Instant::now();
                for i in 0..n {
                    sa.vi.post_send(sa.d(DEPTH + i % SOURCES), sa.dh).unwrap();
                    sa.vi.send_done().unwrap();
                }
                let e = rx.join().unwrap();
                n as f64 * KIB64 as f64 / e.duration_since(t).as_secs_f64() / 1e9
            }
        });
        if sa.vi.state() != remora_vipl::ViState::Connected {
            eprintln!("the VI broke (machine too loaded)");
            std::process::exit(1);
        }
        if std::env::var("SLOW").is_ok() && gbs < 20.0 {
            eprintln!("round {rounds}: {:.2} ms", n as f64 * KIB64 as f64 / gbs / 1e6);
        }
        rounds += 1;
        total += gbs;
        best = best.max(gbs);
        all.push(gbs);
    }
    all.sort_by(f64::total_cmp);
    let med = all[all.len() / 2];
    let ns = KIB64 as f64 / med;
    println!(
        "{mode}: {rounds} rounds, median {med:.2} GB/s ({ns:.0} ns/msg), mean {:.2}, best {best:.2}",
        total / rounds as f64
    );
}
