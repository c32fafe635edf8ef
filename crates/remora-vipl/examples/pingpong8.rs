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

#[allow(dead_code)]
mod common;

use common::{pair, Side, DEPTH, SLOT, SOURCES};
use remora_vipl::{Descriptor, Error};
use std::sync::atomic::Ordering;
use std::sync::Barrier;
use std::time::Instant;

/// What a side of the ping-pong does.
trait Leg {
    fn send(&self);
    fn take(&self) -> usize;
    fn repost(&self, addr: usize);
}

impl Leg for Side {
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
    let (sa, sb) = pair(|s| {
        for i in 0..DEPTH {
            let d = Descriptor { length: SLOT as u32, segments: vec![s.seg(i, SLOT)], ..Default::default() };
            s.nic.write_descriptor(s.d(i), s.dh, &d).unwrap();
            s.vi.post_recv(s.d(i), s.dh).unwrap();
        }
        for k in 0..SOURCES {
            let d = Descriptor { length: 8, segments: vec![s.seg(DEPTH + k, 8)], ..Default::default() };
            s.nic.write_descriptor(s.d(DEPTH + k), s.dh, &d).unwrap();
        }
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
