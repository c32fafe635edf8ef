//! `remora soak`: a chaos soak anyone can run (issue 18, item 1).
//!
//! It starts `--nodes` node daemons on this host in a private runtime directory, joined by
//! a cluster file over TCP on loopback (so heartbeats, links and the DSM pager are on the
//! path, as between hosts), then `--clients` worker processes (`remora soak-worker`, this
//! binary again) that run a seeded random mix of SISCI and SCIF operations with every byte
//! checked ([`worker`], [`sisci_ops`], [`scif_ops`]). Meanwhile a fault schedule drawn from
//! the seed ([`schedule`]) kills workers (they are started again), kills daemons (started
//! again) and stops daemons past three heartbeats. At the end it prints operations, faults,
//! corrupt bytes, hung calls, the cluster's answers to the faults against the API's
//! promises and the daemons' resources against the baseline ([`checks`], [`report`]), and
//! fails when any check does.
//!
//! Layout: `rng.rs` (generator and byte patterns), `worker.rs` (the worker process and its
//! watchdog), `sisci_ops.rs`, `scif_ops.rs` (the operations), `schedule.rs` (faults),
//! `checks.rs` (resources and link states), `report.rs` (tally and summary).

mod checks;
mod ctx;
mod report;
mod rng;
mod schedule;
mod scif_ops;
mod sisci_ops;
pub(crate) mod worker;

use remora_sys::ProcessSignal as Signal;
use report::{Summary, Tally};
use schedule::{Fault, FaultKind, Schedule};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
    /// The nodes' heartbeat period in milliseconds (the cluster file's `heartbeat_ms`).
    #[arg(long, default_value_t = 100)]
    heartbeat_ms: u64,
    /// Also run nodes on two network-namespace hosts with cable and netem faults (not in
    /// this version: it says so and runs on this host only).
    #[arg(long)]
    netns: bool,
}

/// The private runtime directory and cluster file of a run.
fn setup(a: &SoakArgs, nodes: &[u32]) -> Result<(PathBuf, PathBuf), String> {
    let dir = std::env::temp_dir().join(format!("remora-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut text = format!(
        "secret = \"remora-soak-{:016x}-secret\"\nheartbeat_ms = {}\nforce_tcp = true\n",
        a.seed, a.heartbeat_ms
    );
    for n in nodes {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        text += &format!("[[node]]\nid = {n}\nhost = \"127.0.0.1\"\nport = {port}\n");
    }
    let cluster = dir.join("cluster.toml");
    std::fs::write(&cluster, text).map_err(|e| e.to_string())?;
    Ok((dir, cluster))
}

/// One worker process and its incarnation.
struct Proc {
    child: Child,
    incarnation: u32,
    reader: std::thread::JoinHandle<()>,
}

/// What starting a worker needs.
struct Spawner {
    exe: PathBuf,
    dir: PathBuf,
    cluster: PathBuf,
    seed: u64,
    nodes: String,
    until_ms: u64,
    tally: Arc<Mutex<Tally>>,
}

impl Spawner {
    fn spawn(&self, index: u32, incarnation: u32) -> Result<Proc, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("worker-{index}.log")))
            .map_err(|e| e.to_string())?;
        let mut child = Command::new(&self.exe)
            .args(["soak-worker", "--index", &index.to_string(), "--incarnation", &incarnation.to_string()])
            .args([
                "--seed",
                &self.seed.to_string(),
                "--nodes",
                &self.nodes,
                "--until-ms",
                &self.until_ms.to_string(),
            ])
            .env("REMORA_RUNTIME_DIR", &self.dir)
            .env("REMORA_CLUSTER", &self.cluster)
            .env("REMORA_IDLE_EXIT", "3600")
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

/// Stop every daemon of the run's directory.
fn shutdown(cfg: &remora_client::Config, nodes: &[u32]) {
    for &n in nodes {
        if let Ok(s) = remora_client::Session::open_control(&cfg.with_node(n)) {
            let _ = s.request(remora_proto::Request::Shutdown, &[]);
        }
    }
}

/// `remora soak`.
pub(crate) fn run(a: SoakArgs) -> Result<(), String> {
    if a.nodes < 2 || a.clients < 1 {
        return Err("a soak needs at least 2 nodes and 1 client".into());
    }
    let nodes: Vec<u32> = (1..=a.nodes).map(|i| 4 * i).collect();
    let (dir, cluster) = setup(&a, &nodes)?;
    let cfg = remora_client::Config {
        node: nodes[0],
        runtime_dir: dir.clone(),
        daemon: remora_client::Config::from_env().ok().and_then(|c| c.daemon),
        spawn: true,
        idle_exit: Duration::from_secs(3600),
        cluster: Some(cluster.clone()),
    };
    let hb = Duration::from_millis(a.heartbeat_ms);
    let mut skipped = Vec::new();
    if a.netns {
        skipped.push(
            "--netns (namespace hosts, veth down/up, tc netem) is not in this version: ran on this host only"
                .to_string(),
        );
    }
    let r = soak(&a, &cfg, &nodes, &dir, &cluster, hb, &mut skipped);
    shutdown(&cfg, &nodes);
    match r {
        Ok(true) => {
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        Ok(false) => Err(format!("the soak failed; daemon and worker logs are in {}", dir.display())),
        Err(e) => Err(format!("{e}; daemon and worker logs are in {}", dir.display())),
    }
}

fn soak(
    a: &SoakArgs,
    cfg: &remora_client::Config,
    nodes: &[u32],
    dir: &Path,
    cluster: &Path,
    hb: Duration,
    skipped: &mut Vec<String>,
) -> Result<bool, String> {
    // The daemons, their links all up (each node probes every other), then the baseline.
    for &n in nodes {
        let d = remora_sisci::Descriptor::open(&remora_sisci::Sisci::with_config(cfg.with_node(n)))
            .map_err(|e| format!("node {n}: {e}"))?;
        for &m in nodes.iter().filter(|&&m| m != n) {
            let _ = d.probe_node(0, m);
        }
        let _ = d.close();
    }
    if !checks::all_links_up(cfg, nodes, Duration::from_secs(10)) {
        return Err("the nodes' links did not all come up within 10 s".into());
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut baseline = Vec::new();
    for &n in nodes {
        baseline.push((n, checks::resources(cfg, n).ok_or(format!("node {n} does not answer"))?));
    }
    let tally = Arc::new(Mutex::new(Tally::default()));
    let end = Instant::now() + Duration::from_secs(a.seconds);
    let sp = Spawner {
        exe: std::env::current_exe().map_err(|e| e.to_string())?,
        dir: dir.to_path_buf(),
        cluster: cluster.to_path_buf(),
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
    let mut sched = Schedule::new(a.seed);
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
                FaultKind::KillDaemon => schedule::kill_daemon(cfg, nodes, nodes[k], hb),
                FaultKind::StopDaemon => {
                    let length = sched.stop_length(hb);
                    schedule::stop_daemon(cfg, nodes, nodes[k], hb, length)
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
        while !matches!(p.child.try_wait(), Ok(Some(_))) {
            if Instant::now() > deadline {
                stuck += 1;
                let _ = p.child.kill();
                let _ = p.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
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
                let now = checks::resources(cfg, *n);
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
    let header = format!(
        "remora soak: {} s, nodes {:?} over TCP on loopback (heartbeat {} ms), {} workers, seed {}, \
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
