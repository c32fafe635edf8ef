//! The references beside the rows on one host: `memcpy` over the very buffers of a stream,
//! the same messages handed between two cores by bare shared memory, the raw shared-memory
//! ping-pong and SCIF's 8-byte message between the same two nodes.

use super::*;
use remora_scif::{Endpoint, PortId, Scif};
use std::sync::atomic::AtomicU64;

/// `memcpy` between the very buffers a stream uses (registered memory, shared in place):
/// `a`'s sources in turn into `b`'s receive slots in turn, or, for the RDMA-write stream
/// (`rdma`), into the one remote range every write of that stream targets, so that both
/// sides copy into a destination equally warm in the caches.
pub(super) fn memcpy_same(a: &Side, b: &Side, n: usize, rdma: bool) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        let dst = if rdma { 0 } else { (i % DEPTH) * KIB64 };
        let _ = b.buf.copy_from(dst, &a.buf, (DEPTH + i % SOURCES) * KIB64, KIB64);
    }
    n as f64 * KIB64 as f64 / t.elapsed().as_secs_f64()
}

/// A count of the raw message stream, on a line of its own (the two counts are written by
/// two threads).
#[repr(align(128))]
pub(super) struct Count(AtomicU64);

/// Spin until `word` reaches `want` (10 s at most: a stopped peer cannot hang the bench).
pub(super) fn wait_past(word: &Count, want: u64) -> Result<(), String> {
    let mut spins = 0u64;
    let mut since = None;
    while word.0.load(Ordering::Acquire) < want {
        spins += 1;
        if spins.is_multiple_of(1 << 16)
            && since.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(10)
        {
            return Err("the raw stream's peer stopped".into());
        }
    }
    Ok(())
}

/// The same `n` messages between the same buffers as [`stream`], handed from one thread to
/// another on the other core the barest way shared memory allows: the sender copies a
/// source into the receiver's next slot (waiting for a free one once all [`DEPTH`] are
/// full) and publishes its count, the receiver polls the count and frees the slot (its
/// repost) by publishing its own. No descriptors, no completion entries: what a message
/// stream between two cores costs beyond `memcpy` (which runs on one core and hands
/// nothing over), the fair reference beside it.
pub(super) fn raw_shm_messages(a: &Side, b: &Side, n: usize, rdma: bool) -> Result<f64, String> {
    let (sent, freed) = (Count(AtomicU64::new(0)), Count(AtomicU64::new(0)));
    let go = Barrier::new(2);
    std::thread::scope(|sc| -> Result<f64, String> {
        let rx = sc.spawn(|| -> Result<Instant, String> {
            go.wait();
            for i in 0..n as u64 {
                wait_past(&sent, i + 1)?;
                freed.0.store(i + 1, Ordering::Release);
            }
            Ok(Instant::now())
        });
        go.wait();
        let t = Instant::now();
        for i in 0..n {
            wait_past(&freed, (i + 1).saturating_sub(DEPTH) as u64)?;
            let dst = if rdma { 0 } else { (i % DEPTH) * KIB64 };
            b.buf.copy_from(dst, &a.buf, (DEPTH + i % SOURCES) * KIB64, KIB64).map_err(e)?;
            sent.0.store(i as u64 + 1, Ordering::Release);
        }
        let end = rx.join().map_err(|_| "receiver panicked")??;
        Ok(n as f64 * KIB64 as f64 / end.duration_since(t).as_secs_f64())
    })
}

/// `n` 8-byte round trips of the raw shared-memory ping-pong between two threads of this
/// process, over a file in `/dev/shm`; ns per one-way trip.
pub(super) fn raw_shm(n: u32) -> Result<f64, String> {
    let path = format!("/dev/shm/remora-bench-vipl-{}", std::process::id());
    let (m1, m2) = (raw_file(&path, true)?, raw_file(&path, false)?);
    let _ = std::fs::remove_file(&path);
    let go = &Barrier::new(2);
    std::thread::scope(|sc| -> Result<f64, String> {
        let m2 = &m2;
        let t = sc.spawn(move || {
            go.wait();
            echo(m2.atomic_u64(4096).ok_or("raw")?, m2.atomic_u64(0).ok_or("raw")?, 0, n)
        });
        go.wait();
        let ns = super::super::common::pingpong(
            m1.atomic_u64(0).ok_or("raw")?,
            m1.atomic_u64(4096).ok_or("raw")?,
            0,
            n,
        )?;
        t.join().map_err(|_| "echo thread panicked")??;
        Ok(ns)
    })
}

/// A SCIF endpoint pair between the same two nodes, for SCIF's 8-byte message.
pub(super) fn scif_pair(
    a: &remora_sisci::Sisci,
    b: &remora_sisci::Sisci,
) -> Result<(Endpoint, Endpoint), String> {
    let (sa, sb) = (Scif::with_config(a.config().clone()), Scif::with_config(b.config().clone()));
    let l = Endpoint::open(&sb).map_err(e)?;
    let port = l.bind(0).map_err(e)?;
    l.listen(1).map_err(e)?;
    let c = Endpoint::open(&sa).map_err(e)?;
    std::thread::scope(|sc| -> Result<(Endpoint, Endpoint), String> {
        let acc = sc.spawn(|| l.accept(true));
        c.connect(PortId { node: sb.node(), port }).map_err(e)?;
        let (s, _) = acc.join().map_err(|_| "accept thread panicked")?.map_err(e)?;
        Ok((c, s))
    })
}

/// `n` 8-byte SCIF round trips; ns per one-way trip.
pub(super) fn scif_pingpong(c: &Endpoint, s: &Endpoint, n: u32) -> Result<f64, String> {
    let one = |ep: &Endpoint, out: bool| -> Result<(), String> {
        let mut b = [7u8; 8];
        let r = if out { ep.send(&b, true) } else { ep.recv(&mut b, true) };
        match r {
            Ok(8) => Ok(()),
            other => Err(format!("scif message failed: {other:?}")),
        }
    };
    let go = Barrier::new(2);
    std::thread::scope(|sc| -> Result<f64, String> {
        let echo = sc.spawn(|| -> Result<(), String> {
            go.wait();
            for _ in 0..n {
                one(s, false)?;
                one(s, true)?;
            }
            Ok(())
        });
        go.wait();
        let t = Instant::now();
        for _ in 0..n {
            one(c, true)?;
            one(c, false)?;
        }
        let ns = t.elapsed().as_nanos() as f64 / (2.0 * n as f64);
        echo.join().map_err(|_| "echo thread panicked")??;
        Ok(ns)
    })
}
