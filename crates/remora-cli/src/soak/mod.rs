//! `remora soak`: a chaos soak anyone can run (issue 18, item 1).
//!
//! It starts `--nodes` node daemons on this host in a private runtime directory, joined by
//! a cluster file over TCP on loopback (so heartbeats, links and the DSM pager are on the
//! path, as between hosts) — or, with `--netns`, one node on each of two network-namespace
//! hosts joined by veth cables ([`cluster`]) — then `--clients` worker processes
//! (`remora soak-worker`, this binary again) that run a seeded random mix of SISCI, SCIF,
//! RSM and VIPL operations with every byte checked ([`worker`], [`sisci_ops`],
//! [`scif_ops`], [`rsm_ops`], [`vipl_ops`]). Meanwhile a fault schedule drawn from the seed
//! ([`schedule`], [`net_faults`]) kills workers (they are started again), kills daemons
//! (started again), stops daemons past three heartbeats and, between namespace hosts, pulls
//! a cable past three heartbeats and adds loss and delay with `tc netem`. At the end it
//! prints operations, faults, corrupt bytes, hung calls, the cluster's answers to the
//! faults against the API's promises and the daemons' resources against the baseline
//! ([`checks`], [`report`]), and fails when any check does.
//!
//! Layout: `rng.rs` (generator and byte patterns), `cluster.rs` (where the nodes live),
//! `worker.rs` (the worker process and its watchdog), `ctx.rs` (what operations share),
//! `sisci_ops.rs`, `scif_ops.rs`, `rsm_ops.rs`, `vipl_ops.rs` (the operations),
//! `schedule.rs` (daemon faults), `net_faults.rs` (cable faults), `checks.rs` (resources
//! and link states), `report.rs` (tally and summary).

mod checks;
mod cluster;
mod ctx;
mod net_faults;
mod report;
mod rng;
mod rsm_ops;
mod schedule;
mod scif_ops;
mod sisci_ops;
mod vipl_ops;
pub(crate) mod worker;

use cluster::Nodes;
use remora_sys::ProcessSignal as Signal;
use report::{Summary, Tally};
use schedule::{Fault, FaultKind, Schedule};
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The arguments of `remora soak`.
#[derive(clap::Args, Debug)]
pub(crate) struct SoakArgs {
    /// How long the workers run, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Node daemons to start on this host (at least 2).
    #[arg(long, default_value_t = 3)]
    nodes: u32,
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    clients: u32,
    /// The seed every random choice follows from (operations and faults).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The nodes' heartbeat period in milliseconds (the cluster file's `heartbeat_ms`; on
    /// namespace hosts the cluster builder's, 200 ms).
    #[arg(long, default_value_t = 100)]
    heartbeat_ms: u64,
    /// Run one node on each of two network-namespace hosts instead (root and iproute2;
    /// `--nodes` is then 2), with cable faults (veth down/up) and, where the kernel has
    /// `sch_netem`, packet loss and delay. Where namespaces cannot be built it says why
    /// and exits 0 without running.
    #[arg(long)]
    netns: bool,
}

/// One worker process and its incarnation.
struct Proc {
    child: Child,
    incarnation: u32,
    reader: std::thread::JoinHandle<()>,
}

/// What starting a worker needs.
struct Spawner<'a> {
    exe: PathBuf,
    at: &'a Nodes,
    seed: u64,
    nodes: String,
    until_ms: u64,
    tally: Arc<Mutex<Tally>>,
}

impl Spawner<'_> {
    fn spawn(&self, index: u32, incarnation: u32) -> Result<Proc, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.at.dir.join(format!("worker-{index}.log")))
            .map_err(|e| e.to_string())?;
        let mut child = self
            .at
            .command(&self.exe, index)
            .args(["soak-worker", "--index", &index.to_string(), "--incarnation", &incarnation.to_string()])
            .args([
                "--seed",
                &self.seed.to_string(),
                "--nodes",
                &self.nodes,
                "--dirs",
                &self.at.dirs_arg(),
                "--until-ms",
                &self.until_ms.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start a worker ({}): {e}", self.exe.display()))?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let tally = self.tally.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                tally.lock().unwrap_or_else(|p| p.into_inner()).line(index, incarnation, &line);
            }
        });
        Ok(Proc { child, incarnation, reader })
    }
}

/// `remora soak`.
pub(crate) fn run(a: SoakArgs) -> Result<(), String> {
    if a.nodes < 2 || a.clients < 1 {
        return Err("a soak needs at least 2 nodes and 1 client".into());
    }
    let mut skipped = Vec::new();
    let at = if a.netns {
        // A missing remorad is a broken build, not a machine without namespaces: it fails.
        crate::daemon_binary()?;
        match Nodes::netns() {
            Ok(at) => at,
            Err(why) => {
                println!("remora soak --netns: not run here: {why}");
                return Ok(());
            }
        }
    } else {
        Nodes::local(a.nodes, a.seed, a.heartbeat_ms)?
    };
    let mut netem = false;
    if at.is_netns() {
        match at.netem_works() {
            Ok(()) => netem = true,
            Err(e) => skipped.push(format!(
                "packet loss and delay (tc netem) cannot run here: {e} (the kernel has no sch_netem \
                 module); those faults were cable faults instead"
            )),
        }
    }
    let r = soak(&a, &at, netem, &mut skipped);
    at.shutdown();
    match r {
        Ok(true) => {
            if !at.is_netns() {
                let _ = std::fs::remove_dir_all(&at.dir);
            }
            Ok(())
        }
        Ok(false) => {
            at.keep_logs();
            Err(format!("the soak failed; daemon and worker logs are in {}", at.log_dir().display()))
        }
        Err(e) => {
            at.keep_logs();
            Err(format!("{e}; daemon and worker logs are in {}", at.log_dir().display()))
        }
    }
}

fn soak(a: &SoakArgs, at: &Nodes, netem: bool, skipped: &mut Vec<String>) -> Result<bool, String> {
    let (nodes, hb) = (&at.ids, at.hb);
    // The daemons, their links all up (each node probes every other), then the baseline.
    at.start()?;
    if !checks::all_links_up(at, Duration::from_secs(10)) {
        return Err("the nodes' links did not all come up within 10 s".into());
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut baseline = Vec::new();
    for &n in nodes {
        baseline.push((n, checks::resources(at, n).ok_or(format!("node {n} does not answer"))?));
    }
    let tally = Arc::new(Mutex::new(Tally::default()));
    let end = Instant::now() + Duration::from_secs(a.seconds);
    let sp = Spawner {
        exe: std::env::current_exe().map_err(|e| e.to_string())?,
        at,
        seed: a.seed,
        nodes: nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(","),
        until_ms: ctx::now_ms() + a.seconds * 1000,
        tally: tally.clone(),
    };
    let mut procs = Vec::new();
    for i in 0..a.clients {
        procs.push(sp.spawn(i, 0)?);
    }
    let mut readers = Vec::new();
    let mut faults: Vec<Fault> = Vec::new();
    let mut observations = Vec::new();
    let mut sched = Schedule::new(a.seed, at.is_netns(), netem);
    while Instant::now() < end {
        for (i, p) in procs.iter_mut().enumerate() {
            if matches!(p.child.try_wait(), Ok(Some(_))) && Instant::now() < end {
                let next = sp.spawn(i as u32, p.incarnation + 1)?;
                let old = std::mem::replace(p, next);
                readers.push(old.reader);
            }
        }
        if let Some((kind, k)) = sched.due(procs.len(), nodes.len()) {
            let (fault, obs) = match kind {
                FaultKind::KillWorker => {
                    let now = ctx::now_ms();
                    let hit = schedule::signal(procs[k].child.id(), Signal::Kill).is_ok();
                    let f = Fault { kind, target: k as u32, from_ms: now, to_ms: now };
                    (hit.then_some(f), vec![])
                }
                FaultKind::KillDaemon => schedule::kill_daemon(at, nodes[k]),
                FaultKind::StopDaemon => {
                    let length = sched.stop_length(hb);
                    schedule::stop_daemon(at, nodes[k], length)
                }
                FaultKind::Cable => {
                    let length = sched.stop_length(hb);
                    net_faults::cable(at, nodes[k], length)
                }
                FaultKind::Netem => {
                    let length = sched.stop_length(hb) * 2;
                    net_faults::netem(at, nodes[k], length)
                }
            };
            faults.extend(fault);
            observations.extend(obs);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every worker ends by itself shortly after the end time; one that does not is stuck.
    let mut stuck = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    for mut p in procs {
        if remora_netns::wait_until(&mut p.child, deadline).is_none() {
            stuck += 1;
        }
        readers.push(p.reader);
    }
    for r in readers {
        let _ = r.join();
    }
    // The daemons must come back to the baseline once every worker is gone.
    let t = Instant::now();
    let resources = loop {
        let now: Vec<_> = baseline
            .iter()
            .map(|(n, base)| {
                let now = checks::resources(at, *n);
                let diff = match &now {
                    Some(r) => checks::differences(base, r, 0),
                    None => vec!["not answering".to_string()],
                };
                (*n, base.clone(), now, diff)
            })
            .collect();
        if now.iter().all(|r| r.3.is_empty()) || t.elapsed() > Duration::from_secs(20) {
            break now;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let tally = tally.lock().unwrap_or_else(|p| p.into_inner());
    let place = if at.is_netns() { "on two namespace hosts (veth, bridge)" } else { "over TCP on loopback" };
    let header = format!(
        "remora soak: {} s, nodes {:?} {place} (heartbeat {} ms), {} workers, seed {}, \
         worker incarnations {}",
        a.seconds,
        nodes,
        hb.as_millis(),
        a.clients,
        a.seed,
        tally.stats.len()
    );
    let summary = Summary {
        header,
        faults: &faults,
        skipped,
        observations: &observations,
        resources: &resources,
        stuck_workers: stuck,
    };
    Ok(report::print(&tally, &summary).is_empty())
}
