//! `remora soak-worker`: one client process of the soak. It keeps a SISCI world and a SCIF
//! world between two nodes, runs a seeded random mix of operations on them, checks every
//! byte against the pattern it wrote, and says what happened on stdout, one line each:
//!
//! * `STAT name=count …` — cumulative counts (operations done by kind, `err:Kind`: the
//!   failures the API reported, `rebuild`: worlds made again), every half second and at
//!   the end;
//! * `CORRUPT op from_ms to_ms bytes what` — bytes read back that differ from what was
//!   written although every call said it succeeded;
//! * `LOST op from_ms to_ms what` — an interrupt whose trigger succeeded and never came;
//! * `HUNG call elapsed_ms` — a call that ran past its limit and the margin (the watchdog
//!   thread notices it while the call is still stuck).
//!
//! The parent decides whether a fault overlapped a corrupt or lost operation.

use super::rng::{op_key, Rng};
use super::{scif_ops::ScifWorld, sisci_ops::SisciWorld};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How much longer than its limit a call may take before it counts as hung.
pub(crate) const MARGIN: Duration = Duration::from_secs(3);

/// Milliseconds since the epoch (the clock the parent's fault log uses too).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A line to the parent (stdout is a pipe to it; a line is written at once).
pub(crate) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The call in flight: its name, when it started, its limit, and whether it was reported.
type Slot = Option<(&'static str, Instant, Duration, bool)>;

/// What a worker's operations share: the watched call, the counters, the operation keys.
pub(crate) struct Ctx {
    watch: Arc<Mutex<Slot>>,
    counts: BTreeMap<String, u64>,
    /// The run's seed.
    pub(crate) seed: u64,
    /// This worker's index.
    pub(crate) worker: u32,
    /// This worker's incarnation (it is restarted after a SIGKILL).
    pub(crate) incarnation: u32,
    op: u64,
    /// The worker's choices.
    pub(crate) rng: Rng,
    /// The nodes of the run.
    pub(crate) nodes: Vec<u32>,
    /// The configuration the environment gives (runtime directory, cluster file).
    pub(crate) base: remora_client::Config,
}

impl Ctx {
    /// Run `f`, a call that may block, under the watchdog with `limit`.
    pub(crate) fn call<T>(&self, name: &'static str, limit: Duration, f: impl FnOnce() -> T) -> T {
        *self.watch.lock().unwrap_or_else(|p| p.into_inner()) = Some((name, Instant::now(), limit, false));
        let r = f();
        *self.watch.lock().unwrap_or_else(|p| p.into_inner()) = None;
        r
    }

    /// Count one `name`.
    pub(crate) fn count(&mut self, name: &str) {
        *self.counts.entry(name.to_string()).or_default() += 1;
    }

    /// Count a failure the API reported (`what` is its error's `Debug` form, whose variant
    /// name is kept).
    pub(crate) fn failed(&mut self, api: &str, what: &str) {
        let kind: String = what.chars().take_while(|c| c.is_alphanumeric()).collect();
        self.count(&format!("err:{api}.{kind}"));
    }

    /// The key of a new operation (the pattern it writes follows from it).
    pub(crate) fn next_key(&mut self) -> u64 {
        self.op += 1;
        op_key(self.seed, self.worker, self.incarnation, self.op)
    }

    /// Report bytes that differ although every call succeeded.
    pub(crate) fn corrupt(&mut self, op: &str, from: u64, bytes: usize, what: String) {
        self.count("corrupt");
        say(&format!("CORRUPT {op} {from} {} {bytes} {what}", now_ms()));
    }

    /// Report an event that never came although its trigger succeeded.
    pub(crate) fn lost(&mut self, op: &str, from: u64, what: String) {
        self.count("lost");
        say(&format!("LOST {op} {from} {} {what}", now_ms()));
    }

    /// Two different nodes of the run, chosen at random.
    pub(crate) fn pair(&mut self) -> (u32, u32) {
        let n = self.nodes.len();
        let a = self.rng.urange(0, n);
        let b = (a + self.rng.urange(1, n.max(2))) % n;
        (self.nodes[a], self.nodes[b])
    }

    fn stat(&self) {
        let parts: Vec<String> = self.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        say(&format!("STAT {}", parts.join(" ")));
    }
}

/// The watchdog: every 100 ms, a call past its limit and the margin is reported once.
fn watchdog(watch: Arc<Mutex<Slot>>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let mut g = watch.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((name, since, limit, reported)) = g.as_mut() {
            let took = since.elapsed();
            if !*reported && took > *limit + MARGIN {
                *reported = true;
                say(&format!("HUNG {name} {}", took.as_millis()));
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
    };
    let mut sisci: Option<SisciWorld> = None;
    let mut scif: Option<ScifWorld> = None;
    let mut last = Instant::now();
    while now_ms() < a.until_ms {
        let pick = cx.rng.range(0, 100);
        if pick < 55 {
            super::sisci_ops::step(&mut cx, &mut sisci);
        } else {
            super::scif_ops::step(&mut cx, &mut scif);
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
    cx.stat();
    say("DONE");
    Ok(())
}
