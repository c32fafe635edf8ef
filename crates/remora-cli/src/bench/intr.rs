//! `intr`: interrupt wake-up latency, the waiter blocked or spinning, beside raw futexes.

use super::common::*;
use remora_sisci::{Descriptor, Sisci};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub(crate) const PARENT_INTNO: u32 = 0x7e01;
pub(crate) const CHILD_INTNO: u32 = 0x7e02;
pub(crate) const SPIN_BATCH_FACTOR: u32 = 20;

/// Raw reference: a futex word per direction in a shared file. `spin` zero blocks at once.
pub(crate) struct RawPair<'a> {
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

pub(crate) fn raw_pair(m: &remora_sys::Mapping, parent: bool) -> Result<RawPair<'_>, String> {
    let w = |o| m.atomic_u32(o).ok_or("raw map");
    let (a, aw, b, bw) = (w(0)?, w(4)?, w(64)?, w(68)?);
    Ok(if parent {
        RawPair { out: a, out_waiters: aw, inp: b, inp_waiters: bw }
    } else {
        RawPair { out: b, out_waiters: bw, inp: a, inp_waiters: aw }
    })
}

pub(crate) fn intr(batch: u32, rounds: u32) -> Result<(), String> {
    let (a, b) = nodes()?;
    let raw_path = format!("/dev/shm/remora-bench-intr-{}", std::process::id());
    let raw = raw_file(&raw_path, true)?;
    let dev = Descriptor::open(&a).map_err(e)?;
    let mine = remora_sisci::Interrupt::create(&dev, 0, Some(PARENT_INTNO), true, None).map_err(e)?;
    let (peer, batch_s, rounds_s) = (a.local_node_id().to_string(), batch.to_string(), rounds.to_string());
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
    ];
    let (mut child, _) = spawn_responder(b.local_node_id(), &args)?;
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
    row_us("interrupt wake, waiter blocked", o, t, "≤ 1.20 (raw futex)");
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

pub(crate) fn intr_child(raw_path: &str, peer_node: u32, batch: u32, rounds: u32) -> Result<(), String> {
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
