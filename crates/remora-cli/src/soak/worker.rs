//! `remora soak-worker`: one client process of the soak. It keeps a SISCI, a SCIF, an RSM
//! and a VIPL world, each between two nodes (a process of each: its sessions go to each
//! node's own socket, so on namespace hosts every byte between them crosses the cable), runs a seeded random mix of operations on them, checks every
//! byte against the pattern it wrote, and says what happened on stdout, one line each:
//!
//! * `STAT name=count …` — cumulative counts (operations done by kind, `err:Kind`: the
//!   failures the API reported, `rebuild`: worlds made again), every half second and at
//!   the end;
//! * `CORRUPT op from_ms to_ms bytes what` — bytes read back that differ from what was
//!   written although every call said it succeeded;
//! * `LOST op from_ms to_ms what` — an interrupt whose trigger succeeded and never came;
//! * `HUNG call elapsed_ms …` — a call that ran past its limit and the margin (the watchdog
//!   thread notices it while the call is still stuck), with when it started.
//!
//! The parent decides whether a fault overlapped a corrupt or lost operation.

use super::ctx::{now_ms, say, Ctx, Slot, MARGIN};
use super::rng::Rng;
use super::{rsm_ops::RsmWorld, scif_ops::ScifWorld, sisci_ops::SisciWorld, vipl_ops::ViplWorld};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The watchdog: every 100 ms, a call past its limit and the margin is reported once.
fn watchdog(watch: Arc<Mutex<Slot>>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let mut g = watch.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((name, since, limit, reported)) = g.as_mut() {
            let took = since.elapsed();
            if !*reported && took > *limit + MARGIN {
                *reported = true;
                say(&format!(
                    "HUNG {name} {} ms, since {} ms after the epoch",
                    took.as_millis(),
                    now_ms() - took.as_millis() as u64
                ));
            }
        }
    }
}

/// The worker's arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct WorkerArgs {
    /// This worker's index.
    #[arg(long)]
    index: u32,
    /// Its incarnation.
    #[arg(long, default_value_t = 0)]
    incarnation: u32,
    /// The run's seed.
    #[arg(long)]
    seed: u64,
    /// The nodes, comma separated.
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<u32>,
    /// Each node's runtime directory, comma separated (default: the environment's).
    #[arg(long, value_delimiter = ',')]
    dirs: Vec<std::path::PathBuf>,
    /// Stop at this time (milliseconds since the epoch).
    #[arg(long)]
    until_ms: u64,
}

/// The worker's main loop: operations until the end time, then its worlds released.
pub(crate) fn run(a: WorkerArgs) -> Result<(), String> {
    let base = remora_client::Config::from_env().map_err(|e| e.to_string())?;
    let watch: Arc<Mutex<Slot>> = Arc::new(Mutex::new(None));
    let w = watch.clone();
    std::thread::spawn(move || watchdog(w));
    let mut cx = Ctx {
        watch,
        counts: BTreeMap::new(),
        seed: a.seed,
        worker: a.index,
        incarnation: a.incarnation,
        op: 0,
        rng: Rng::new(a.seed, (u64::from(a.index) << 32) | u64::from(a.incarnation) | 1 << 63),
        nodes: a.nodes,
        base,
        dirs: a.dirs,
    };
    let mut sisci: Option<SisciWorld> = None;
    let mut scif: Option<ScifWorld> = None;
    let mut rsm: Option<RsmWorld> = None;
    let mut vipl: Option<ViplWorld> = None;
    let mut last = Instant::now();
    while now_ms() < a.until_ms {
        match cx.rng.range(0, 100) {
            0..35 => super::sisci_ops::step(&mut cx, &mut sisci),
            35..65 => super::scif_ops::step(&mut cx, &mut scif),
            65..82 => super::rsm_ops::step(&mut cx, &mut rsm),
            _ => super::vipl_ops::step(&mut cx, &mut vipl),
        }
        if last.elapsed() > Duration::from_millis(500) {
            cx.stat();
            last = Instant::now();
        }
    }
    if let Some(w) = sisci.take() {
        cx.call("sisci.teardown", Duration::from_secs(10), || w.teardown());
    }
    if let Some(w) = scif.take() {
        cx.call("scif.teardown", Duration::from_secs(10), || w.teardown());
    }
    if let Some(w) = rsm.take() {
        cx.call("rsm.teardown", Duration::from_secs(10), || w.teardown());
    }
    if let Some(w) = vipl.take() {
        cx.call("vipl.teardown", Duration::from_secs(10), || w.teardown());
    }
    cx.stat();
    say("DONE");
    Ok(())
}
