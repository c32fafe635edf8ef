//! A profiling driver for issue 15: the 8-byte ping-pong of `remora bench vipl --latency`
//! (64 receives posted on each side, three send descriptors rotated, 8-byte sends), without
//! the other rows. `pingpong8 MODE ORDER N`: MODE `one` runs the `N` round trips in one
//! thread, in the function `one` (every call finds its completion at once: the work of a
//! round trip with no polling), `two` on two threads as the bench does (polling
//! receivers); it prints ns per one-way trip. ORDER `after` posts the receive taken again
//! after the next send (the bench's main row), `before` before it (the record row).
//!
//! Instructions per round trip, where the machine has no hardware counters (`perf stat`
//! finds none in this VM): callgrind, collecting only inside `one`, at two `N`, the
//! difference divided by theirs:
//! `valgrind --tool=callgrind --toggle-collect='pingpong8::one' pingpong8 one before 12000`.
//! Valgrind needs rustix built with its `use-libc-auxv` feature (add it to the workspace's
//! `rustix` features for that build only, in a target directory of its own): without it
//! rustix reads the kernel's auxiliary vector itself and follows a vDSO address valgrind
//! never mapped. It starts the nodes of this host it needs (`REMORA_DAEMON` names
//! `remorad`); give it a `REMORA_RUNTIME_DIR` of its own on a shared machine.

use remora_sisci::Sisci;
use remora_vipl::{
    DataSegment, Descriptor, Error, MemAttributes, MemHandle, NetAddress, Nic, UserRegion, Vi, ViAttributes,
    RELIABLE_DELIVERY,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const DEPTH: usize = 64;
const SOURCES: usize = 3;
const SLOT: usize = 64 << 10;

#[repr(align(128))]
struct Side {
    nic: Nic,
    vi: Vi,
    desc: UserRegion,
    dh: MemHandle,
    buf: UserRegion,
    bh: MemHandle,
    sent: AtomicUsize,
}

fn leak(len: usize) -> UserRegion {
    let m: &'static mut [u8] = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
    let skip = (4096 - m.as_ptr() as usize % 4096) % 4096;
    UserRegion::from_static(&mut m[skip..skip + len])
}

fn side(nic: Nic) -> Side {
    let ptag = nic.create_ptag();
    let attrs = ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: 1 << 20,
        ptag,
        rdma_write: true,
        rdma_read: true,
    };
    let vi = Vi::create(&nic, attrs, None, None).unwrap();
    let (desc, buf) = (leak((DEPTH + SOURCES) * 64), leak((DEPTH + SOURCES) * SLOT));
    for s in 0..SOURCES {
        buf.write((DEPTH + s) * SLOT, &vec![0x11 * (s as u8 + 1); SLOT]).unwrap();
    }
    let m = MemAttributes { ptag, rdma_write: true, rdma_read: true };
    let dh = nic.register(desc, m).unwrap();
    let bh = nic.register(buf, m).unwrap();
    Side { nic, vi, desc, dh, buf, bh, sent: AtomicUsize::new(0) }
}

impl Side {
    fn d(&self, i: usize) -> usize {
        self.desc.addr() + i * 64
    }
    fn seg(&self, slot: usize, len: usize) -> DataSegment {
        DataSegment { addr: (self.buf.addr() + slot * SLOT) as u64, handle: self.bh, len: len as u32 }
    }
    fn send(&self) {
        let s = self.sent.load(Ordering::Relaxed);
        self.sent.store(s + 1, Ordering::Relaxed);
        self.vi.post_send(self.d(DEPTH + s % SOURCES), self.dh).unwrap();
        self.vi.send_done().unwrap();
    }
    fn take(&self) -> usize {
        loop {
            match self.vi.recv_done() {
                Ok((addr, _)) => return addr,
                Err(Error::NotDone) => {}
                Err(x) => panic!("{x:?}"),
            }
        }
    }
    fn repost(&self, addr: usize) {
        self.vi.post_recv(addr, self.dh).unwrap();
    }
}

/// `n` round trips in this thread (a function of its own: callgrind's `--toggle-collect`
/// names it).
#[inline(never)]
fn one(sa: &Side, sb: &Side, before: bool, n: u64) {
    let mut ta = None;
    for _ in 0..n {
        sa.send();
        if let Some(x) = ta.take() {
            sa.repost(x);
        }
        let x = sb.take();
        if before {
            sb.repost(x);
            sb.send();
        } else {
            sb.send();
            sb.repost(x);
        }
        let x = sa.take();
        if before {
            sa.repost(x);
        } else {
            ta = Some(x);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_else(|| "one".into());
    let order = args.get(2).map(String::as_str).unwrap_or("after");
    let n: Option<u64> = args.get(3).map_or(Some(1_000_000), |s| s.parse().ok());
    let (true, true, Some(n)) =
        (["one", "two"].contains(&mode.as_str()), ["before", "after"].contains(&order), n)
    else {
        eprintln!("usage: pingpong8 [one|two] [before|after] [round trips]");
        std::process::exit(2);
    };
    let before = order == "before";
    let a = Sisci::initialize().unwrap();
    let mut cfg = a.config().clone();
    cfg.node = a.local_node_id() + 4;
    let b = Sisci::with_config(cfg);
    let sa = side(Nic::open_with_config("remora0", a.config().clone()).unwrap());
    let sb = side(Nic::open_with_config("remora0", b.config().clone()).unwrap());
    for s in [&sa, &sb] {
        for i in 0..DEPTH {
            let d = Descriptor { length: SLOT as u32, segments: vec![s.seg(i, SLOT)], ..Default::default() };
            s.nic.write_descriptor(s.d(i), s.dh, &d).unwrap();
            s.vi.post_recv(s.d(i), s.dh).unwrap();
        }
        for k in 0..SOURCES {
            let d = Descriptor { length: 8, segments: vec![s.seg(DEPTH + k, 8)], ..Default::default() };
            s.nic.write_descriptor(s.d(DEPTH + k), s.dh, &d).unwrap();
        }
    }
    let addr = NetAddress::new(sb.nic.node(), b"bench");
    std::thread::scope(|sc| {
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
                    r.unwrap();
                    break;
                }
            }
        }
        w.join().unwrap().unwrap();
    });
    // The side's order: take, then (before) repost and send, or (after) send and repost.
    let leg = |s: &Side, took: &mut Option<usize>| {
        s.send();
        if let Some(a) = took.take() {
            s.repost(a);
        }
        let a = s.take();
        if before {
            s.repost(a);
        } else {
            *took = Some(a);
        }
    };
    let t = Instant::now();
    if mode == "one" {
        one(&sa, &sb, before, n);
    } else {
        let go = Barrier::new(2);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                go.wait();
                for _ in 0..n {
                    let a = sb.take();
                    if before {
                        sb.repost(a);
                        sb.send();
                    } else {
                        sb.send();
                        sb.repost(a);
                    }
                }
            });
            go.wait();
            let mut took = None;
            for _ in 0..n {
                leg(&sa, &mut took);
            }
        });
    }
    let ns = t.elapsed().as_nanos() as f64 / (2.0 * n.max(1) as f64);
    println!("{mode} {}: {n} round trips, {ns:.1} ns one-way", if before { "before" } else { "after" });
}
