//! `intr`: interrupt trigger-to-wake latency between processes of two nodes of this host,
//! each row beside the same ping-pong over raw futexes in a shared file.
//!
//! Every wake-up is timed from a stamp of the system clock the triggering side writes just
//! before it triggers to the waiter's return from its wait; a batch's figure is the mean
//! over its wakes (both processes'), a row's the median over batches, raw and Remora
//! batches interleaved.
//!
//! * *waiter blocked*: both waits block at once (no spin), and each side, once woken, spins
//!   `--pause-us` (default 50 µs) before it triggers back, so that the other side is asleep
//!   in `FUTEX_WAIT` by then. Without the pause, on two otherwise idle cores, the raw
//!   reference measured 0.3 µs a wake beside Remora's 20-26 µs, too short for a sleep and
//!   a wake-up: each side's trigger lands while the other is still on its way into
//!   `FUTEX_WAIT`, which then returns at once, while Remora's slightly longer path sleeps
//!   and is woken (`--pause-us 0` runs that way; the line under the rows counts the waits
//!   that slept). Unpinned, this row measures a wake-up sent to another, idle core; on a
//!   virtual machine whose idle cores halt (`guest_halt_poll_ns` 0) that is ~25 µs, on
//!   both sides. (Two processes the scheduler keeps on one core, on a loaded machine, are
//!   the one-core row's hand-over instead: the line under the rows shows it, about half of
//!   the waits sleeping.)
//! * *waiter blocked, one core*: both processes' ping-pong threads pinned to one CPU (no
//!   pause: the waker's own wait lets the waiter run): each wake-up is a hand-over of that
//!   core, the path's own cost apart from where the scheduler sends the wake-up.
//! * *waiter spinning*: spin-then-block with the default spin (50 µs), twenty times the
//!   batch; the waiter catches the trigger spinning.

use super::common::*;
use remora_sisci::{Descriptor, Sisci};
use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) const PARENT_INTNO: u32 = 0x7e01;
pub(crate) const CHILD_INTNO: u32 = 0x7e02;
pub(crate) const SPIN_BATCH_FACTOR: u32 = 20;
const LONG: Option<Duration> = Some(Duration::from_secs(10));

/// Raw reference: a futex word per direction in a shared file. `spin` zero blocks at once.
pub(crate) struct RawPair<'a> {
    out: &'a AtomicU32,
    out_waiters: &'a AtomicU32,
    inp: &'a AtomicU32,
    inp_waiters: &'a AtomicU32,
    seen: std::cell::Cell<u32>,
}

impl RawPair<'_> {
    fn signal(&self) -> Result<(), String> {
        self.out.fetch_add(1, Ordering::SeqCst);
        if self.out_waiters.load(Ordering::SeqCst) > 0 {
            remora_sys::sync::futex_wake_all(self.out);
        }
        Ok(())
    }

    fn wait(&self, spin: Duration) -> Result<(), String> {
        let seen = self.seen.get();
        let r = remora_sys::sync::spin_then_block(self.inp, self.inp_waiters, spin, LONG, || {
            self.inp.load(Ordering::SeqCst) != seen
        });
        self.seen.set(self.inp.load(Ordering::SeqCst));
        match r {
            remora_sys::sync::WaitOutcome::Ready => Ok(()),
            remora_sys::sync::WaitOutcome::TimedOut => Err("raw peer stopped answering".into()),
        }
    }
}

/// The shared file's words: the raw futexes (0, 4, 64, 68), the stamp of the last trigger
/// (128), and what the child reports of each batch (192: its wakes' summed latency in ns,
/// 200: how many of its waits slept).
struct Shared<'a> {
    raw: RawPair<'a>,
    stamp: &'a AtomicU64,
    child_sum: &'a AtomicU64,
    child_sleeps: &'a AtomicU64,
}

fn shared(m: &remora_sys::Mapping, parent: bool) -> Result<Shared<'_>, String> {
    let w = |o| m.atomic_u32(o).ok_or("raw map");
    let d = |o| m.atomic_u64(o).ok_or("raw map");
    let (a, aw, b, bw) = (w(0)?, w(4)?, w(64)?, w(68)?);
    let raw = if parent {
        RawPair { out: a, out_waiters: aw, inp: b, inp_waiters: bw, seen: Default::default() }
    } else {
        RawPair { out: b, out_waiters: bw, inp: a, inp_waiters: aw, seen: Default::default() }
    };
    Ok(Shared { raw, stamp: d(128)?, child_sum: d(192)?, child_sleeps: d(200)? })
}

/// The system clock in nanoseconds: the same clock in both processes (`Instant` is not
/// shared between them).
fn now_ns() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    t.as_nanos() as u64
}

/// How many times the calling thread slept so far (its voluntary context switches).
fn sleeps() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One kind of batch: how the waits spin, the pause before each trigger, whether both
/// threads sit on one CPU meanwhile, and how many round trips.
#[derive(Clone, Copy)]
struct Mode {
    spin: Duration,
    pause: Duration,
    pinned: bool,
    n: u32,
}

/// The batches in the order both processes run them, each with its row (0 blocked, 1 one
/// core, 2 spinning): the unpinned kinds interleaved round by round, then the one-core
/// batches, as a thread unpinned stays where it was pinned until the scheduler moves it
/// (two processes left on one core would make the unpinned rows one-core ones).
fn schedule(batch: u32, rounds: u32, pause_us: u64) -> Vec<(usize, Mode)> {
    let spin = remora_sys::sync::DEFAULT_SPIN;
    let zero = Duration::ZERO;
    let blocked = Mode { spin: zero, pause: Duration::from_micros(pause_us), pinned: false, n: batch };
    let one_core = Mode { spin: zero, pause: zero, pinned: true, n: batch };
    let spinning = Mode { spin, pause: zero, pinned: false, n: batch * SPIN_BATCH_FACTOR };
    let unpinned = (0..rounds).flat_map(|_| [(0, blocked), (2, spinning)]);
    unpinned.chain((0..rounds).map(|_| (1, one_core))).collect()
}

fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One side of a batch of `n` round trips (the parent triggers first): returns its wakes'
/// summed latency in ns and how many of its waits slept. The child reports its own into
/// `sh` before its last trigger, so that the parent finds them once the batch is over.
fn side(
    sh: &Shared,
    m: Mode,
    parent: bool,
    mut trigger: impl FnMut() -> Result<(), String>,
    mut wait: impl FnMut() -> Result<(), String>,
) -> Result<(u64, u64), String> {
    let (slept, mut sum) = (sleeps(), 0u64);
    let woke = |sum: &mut u64, wait: &mut dyn FnMut() -> Result<(), String>| -> Result<(), String> {
        wait()?;
        *sum += now_ns().saturating_sub(sh.stamp.load(Ordering::SeqCst));
        Ok(())
    };
    for i in 0..m.n {
        if !parent {
            woke(&mut sum, &mut wait)?;
            if i + 1 == m.n {
                sh.child_sum.store(sum, Ordering::SeqCst);
                sh.child_sleeps.store(sleeps() - slept, Ordering::SeqCst);
            }
        }
        spin_for(m.pause);
        sh.stamp.store(now_ns(), Ordering::SeqCst);
        trigger()?;
        if parent {
            woke(&mut sum, &mut wait)?;
        }
    }
    Ok((sum, sleeps() - slept))
}

/// What the parent keeps of one mode: per batch, the mean wake latency (ns) of raw and
/// ours, and the waits that slept and were made, of each.
#[derive(Default)]
struct Samples {
    raw: Vec<f64>,
    ours: Vec<f64>,
    raw_slept: (u64, u64),
    ours_slept: (u64, u64),
}

impl Samples {
    fn keep(&mut self, sh: &Shared, n: u32, (sum, slept): (u64, u64), raw: bool) {
        let (cs, cl) = (sh.child_sum.load(Ordering::SeqCst), sh.child_sleeps.load(Ordering::SeqCst));
        let mean = (sum + cs) as f64 / (2.0 * n as f64);
        let (v, s) =
            if raw { (&mut self.raw, &mut self.raw_slept) } else { (&mut self.ours, &mut self.ours_slept) };
        v.push(mean);
        *s = (s.0 + slept + cl, s.1 + 2 * n as u64);
    }
}

fn pin(m: Mode) -> Result<Option<remora_sys::sync::Pinned>, String> {
    m.pinned
        .then(|| remora_sys::sync::pin_thread().map_err(|x| format!("cannot pin to one CPU: {x}")))
        .transpose()
}

pub(crate) fn intr(batch: u32, rounds: u32, pause_us: u64) -> Result<(), String> {
    let (a, b) = nodes()?;
    let raw_path = format!("/dev/shm/remora-bench-intr-{}", std::process::id());
    let raw = raw_file(&raw_path, true)?;
    let dev = Descriptor::open(&a).map_err(e)?;
    let mine = remora_sisci::Interrupt::create(&dev, 0, Some(PARENT_INTNO), true, None).map_err(e)?;
    let peer = a.local_node_id().to_string();
    let (batch_s, rounds_s, pause_s) = (batch.to_string(), rounds.to_string(), pause_us.to_string());
    let args = [
        "intr-child",
        "--raw-path",
        &raw_path,
        "--peer-node",
        &peer,
        "--batch",
        &batch_s,
        "--rounds",
        &rounds_s,
        "--pause-us",
        &pause_s,
    ];
    let (mut child, _) = spawn_responder(b.local_node_id(), &args)?;
    let theirs =
        remora_sisci::RemoteInterrupt::connect(&dev, b.local_node_id(), 0, CHILD_INTNO, LONG).map_err(e)?;
    let sh = shared(&raw, true)?;
    let mut got: [Samples; 3] = Default::default();
    let result = (|| -> Result<(), String> {
        for (k, m) in schedule(batch, rounds, pause_us) {
            let _pin = pin(m)?;
            let r = side(&sh, m, true, || sh.raw.signal(), || sh.raw.wait(m.spin))?;
            got[k].keep(&sh, m.n, r, true);
            let r = side(
                &sh,
                m,
                true,
                || theirs.trigger().map_err(e),
                || mine.wait_with_spin(LONG, m.spin).map_err(e),
            )?;
            got[k].keep(&sh, m.n, r, false);
        }
        Ok(())
    })();
    let _ = child.wait();
    let _ = std::fs::remove_file(&raw_path);
    result?;
    report(&mut got, pause_us);
    Ok(())
}

/// The rows, and how many waits of the blocked rows slept.
fn report(got: &mut [Samples; 3], pause_us: u64) {
    header();
    let [blocked, one_core, spinning] = got;
    let name =
        if pause_us == 0 { "interrupt wake, blocked, no pause" } else { "interrupt wake, waiter blocked" };
    let r = median_ratio(&blocked.ours, &blocked.raw);
    let (o, t) = (median(&mut blocked.ours), median(&mut blocked.raw));
    row(name, us(o), us(t), r, "≤ 1.20 (raw futex, both blocked)");
    let r = median_ratio(&one_core.ours, &one_core.raw);
    let (o, t) = (median(&mut one_core.ours), median(&mut one_core.raw));
    row("interrupt wake, blocked, one core", us(o), us(t), r, "≤ 1.20 (raw futex, one core)");
    let r = median_ratio(&spinning.ours, &spinning.raw);
    let (o, t) = (median(&mut spinning.ours), median(&mut spinning.raw));
    row(
        "interrupt wake, waiter spinning",
        format!("{o:.0} ns"),
        format!("{t:.0} ns"),
        r,
        "≤ 1 µs (raw spin-then-block)",
    );
    let pct = |(s, n): (u64, u64)| 100.0 * s as f64 / n.max(1) as f64;
    println!(
        "  waits that slept: blocked raw {:.0} % / ours {:.0} %; one core raw {:.0} % / ours {:.0} %",
        pct(blocked.raw_slept),
        pct(blocked.ours_slept),
        pct(one_core.raw_slept),
        pct(one_core.ours_slept)
    );
}

fn us(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

pub(crate) fn intr_child(
    raw_path: &str,
    peer_node: u32,
    batch: u32,
    rounds: u32,
    pause_us: u64,
) -> Result<(), String> {
    let sci = Sisci::initialize().map_err(e)?;
    let raw = raw_file(raw_path, false)?;
    let dev = Descriptor::open(&sci).map_err(e)?;
    let mine = remora_sisci::Interrupt::create(&dev, 0, Some(CHILD_INTNO), true, None).map_err(e)?;
    let theirs = remora_sisci::RemoteInterrupt::connect(&dev, peer_node, 0, PARENT_INTNO, LONG).map_err(e)?;
    println!("ready");
    std::io::stdout().flush().map_err(e)?;
    let sh = shared(&raw, false)?;
    for (_, m) in schedule(batch, rounds, pause_us) {
        let _pin = pin(m)?;
        side(&sh, m, false, || sh.raw.signal(), || sh.raw.wait(m.spin))?;
        side(&sh, m, false, || theirs.trigger().map_err(e), || mine.wait_with_spin(LONG, m.spin).map_err(e))?;
    }
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}
