//! `multicast`: one store (and `SCIFlush`) through a reflective-memory group's multicast map
//! reaching N members on N nodes of this host, beside the N unicast stores (and one flush)
//! a program without multicast makes into N ordinary segments, one on each of those nodes,
//! for N = 2 to 4. After every batch each member's local map is checked to hold the last
//! value, and so is each ordinary segment. Then the same across two namespace hosts
//! (`multicast_hosts.rs`).

use super::common::*;
use remora_sisci::{Descriptor, LocalSegment, Map, MapFlags, RemoteSegment, Sisci};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The group the benchmark uses.
const GROUP: u32 = 4;
/// The id of the ordinary segments of the reference.
const UNICAST_ID: u32 = 0x7e00_0100;
const SIZE: usize = 4096;

/// Run `f` with the first word of every map in `maps` (each held for the whole call).
fn with_words<R>(
    maps: &[Map],
    got: Vec<&AtomicU64>,
    f: &mut dyn FnMut(&[&AtomicU64]) -> R,
) -> Result<R, String> {
    let Some((m, rest)) = maps.split_first() else { return Ok(f(&got)) };
    m.with_atomic(0, |w| {
        let more: Vec<&AtomicU64> = got.iter().copied().chain(std::iter::once(w)).collect();
        with_words(rest, more, f)
    })
    .map_err(e)?
}

/// Nanoseconds per round of `batch` rounds, each storing `base + i` into every word of
/// `words` and then flushing.
fn stores(words: &[&AtomicU64], base: u64, batch: u32) -> f64 {
    let t = Instant::now();
    for i in 1..=batch as u64 {
        for w in words {
            w.store(base + i, Ordering::Relaxed);
        }
        remora_sisci::flush();
    }
    t.elapsed().as_nanos() as f64 / batch as f64
}

/// Every member's local map holds `want`.
fn all_see(locals: &[Map], want: u64) -> Result<(), String> {
    for (k, m) in locals.iter().enumerate() {
        let got = m.with_atomic(0, |w| w.load(Ordering::Acquire)).map_err(e)?;
        if got != want {
            return Err(format!("member {k} holds {got}, not {want}"));
        }
    }
    Ok(())
}

pub(crate) fn multicast(batch: u32, rounds: u32) -> Result<(), String> {
    let first = Sisci::initialize().map_err(e)?;
    let t = Some(Duration::from_secs(10));
    header();
    for n in 2..=4u32 {
        let scis: Vec<Sisci> = (0..n)
            .map(|k| {
                let mut cfg = first.config().clone();
                cfg.node = first.local_node_id() + 4 * k;
                Sisci::with_config(cfg)
            })
            .collect();
        let devs: Vec<Descriptor> =
            scis.iter().map(|s| Descriptor::open(s).map_err(e)).collect::<Result<_, _>>()?;
        let (mut members, mut locals, mut plains, mut plain_locals) = (vec![], vec![], vec![], vec![]);
        for d in &devs {
            let s = LocalSegment::create_broadcast(d, GROUP, SIZE, false, None).map_err(e)?;
            s.prepare(0).map_err(e)?;
            locals.push(s.map(0, SIZE, None, MapFlags::default()).map_err(e)?);
            members.push(s);
            let p = LocalSegment::create(d, Some(UNICAST_ID), SIZE, Default::default()).map_err(e)?;
            p.prepare(0).map_err(e)?;
            p.set_available(0).map_err(e)?;
            plain_locals.push(p.map(0, SIZE, None, MapFlags::default()).map_err(e)?);
            plains.push(p);
        }
        // The writer is a process of the first node: the group's multicast map, and the
        // ordinary segments connected one by one.
        let cast = RemoteSegment::connect_group(&devs[0], GROUP, 0, t).map_err(e)?;
        let cast_map = vec![cast.map(0, SIZE, None, MapFlags::default()).map_err(e)?];
        let unis: Vec<RemoteSegment> = scis
            .iter()
            .map(|s| RemoteSegment::connect(&devs[0], s.local_node_id(), UNICAST_ID, 0, t).map_err(e))
            .collect::<Result<_, _>>()?;
        let uni_maps: Vec<Map> = unis
            .iter()
            .map(|u| u.map(0, SIZE, None, MapFlags::default()).map_err(e))
            .collect::<Result<_, _>>()?;
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        // A warm-up batch of each kind first (caches, page tables), not counted.
        // The kinds alternate which goes first (the first batch after the checks pays more).
        for r in 0..=rounds as u64 {
            let base = r * 2 * batch as u64;
            for kind in [r % 2, 1 - r % 2] {
                let base = base + kind * batch as u64;
                let last = base + batch as u64;
                if kind == 0 {
                    ours.push(with_words(&cast_map, Vec::new(), &mut |w| stores(w, base, batch))?);
                    all_see(&locals, last)?;
                } else {
                    theirs.push(with_words(&uni_maps, Vec::new(), &mut |w| stores(w, base, batch))?);
                    all_see(&plain_locals, last)?;
                }
            }
            if r == 0 {
                ours.clear();
                theirs.clear();
            }
        }
        let (o, th) = (median(&mut ours), median(&mut theirs));
        row(
            &format!("multicast store to {n} members"),
            format!("{o:.1} ns"),
            format!("{th:.1} ns"),
            o / th,
            "≤ 1.00 (N unicast stores + flush)",
        );
        drop((cast_map, uni_maps, locals, plain_locals));
        for u in unis {
            u.disconnect().map_err(e)?;
        }
        cast.disconnect().map_err(e)?;
        for s in members.into_iter().chain(plains) {
            s.remove().map_err(e)?;
        }
    }
    super::multicast_hosts::multicast_across_hosts(rounds)
}
