//! What every benchmark shares: statistics, the table's rows, the two nodes, raw
//! shared-memory ping-pongs (the reference of every latency row).

use remora_sisci::Sisci;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A failure as the message the CLI prints.
pub(crate) fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// The median of `ours[i] / theirs[i]` over samples taken side by side: steadier than the
/// ratio of the medians while the machine's speed drifts between samples.
pub(crate) fn median_ratio(ours: &[f64], theirs: &[f64]) -> f64 {
    let mut r: Vec<f64> = ours.iter().zip(theirs).map(|(o, t)| o / t).collect();
    median(&mut r)
}

pub(crate) fn header() {
    println!(
        "{:<34} {:>14} {:>14} {:>8}  {:<7} target",
        "measure", "remora", "reference", "ratio", "verdict"
    );
}

/// Print a row and keep it (with its verdict against the target) for the summary and
/// `--json`.
pub(crate) fn row(name: &str, ours: String, theirs: String, ratio: f64, target: &str) {
    let verdict = super::verdict::record(name, &ours, &theirs, ratio, target);
    println!("{name:<34} {ours:>14} {theirs:>14} {ratio:>8.2}  {verdict:<7} {target}");
}

/// The two nodes a benchmark uses: this process's node and the next one (node + 4).
pub(crate) fn nodes() -> Result<(Sisci, Sisci), String> {
    let a = Sisci::initialize().map_err(e)?;
    let mut cfg = a.config().clone();
    cfg.node = a.local_node_id() + 4;
    Ok((a.clone(), Sisci::with_config(cfg)))
}

/// Spin until `word` holds `want`; gives up (Err) after 10 s so a dead peer cannot hang us.
pub(crate) fn wait_for(word: &AtomicU64, want: u64) -> Result<(), String> {
    let mut spins = 0u64;
    let mut since = None;
    while word.load(Ordering::Acquire) != want {
        spins += 1;
        if spins.is_multiple_of(1 << 20) {
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > Duration::from_secs(10) {
                return Err("peer stopped answering".into());
            }
        }
    }
    Ok(())
}

/// Like [`wait_for`], but yields the core between looks: on this machine both "hosts" share
/// two cores, and a pure spinner on each would leave none for the threads that move data
/// between them (on two real hosts each has cores of its own).
pub(crate) fn wait_yielding(word: &AtomicU64, want: u64) -> Result<(), String> {
    if remora_config::Config::get().bench_spin {
        return wait_for(word, want);
    }
    let t = Instant::now();
    while word.load(Ordering::Acquire) != want {
        if t.elapsed() > Duration::from_secs(10) {
            return Err("peer stopped answering".into());
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// One batch of ping-pongs: we store `i` into `out` and wait for the peer to echo it into
/// `inp`. Returns nanoseconds per one-way trip.
pub(crate) fn pingpong(out: &AtomicU64, inp: &AtomicU64, base: u64, n: u32) -> Result<f64, String> {
    let t = Instant::now();
    for i in 1..=n as u64 {
        out.store(base + i, Ordering::Release);
        wait_for(inp, base + i)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / (2.0 * n as f64))
}

/// The echo side: wait for `i` in `inp`, store it into `out`.
pub(crate) fn echo(out: &AtomicU64, inp: &AtomicU64, base: u64, n: u32) -> Result<(), String> {
    for i in 1..=n as u64 {
        wait_for(inp, base + i)?;
        out.store(base + i, Ordering::Release);
    }
    Ok(())
}

pub(crate) fn raw_file(path: &str, create: bool) -> Result<remora_sys::Mapping, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
        .map_err(e)?;
    if create {
        f.set_len(8192).map_err(e)?;
    }
    remora_sys::Mapping::new(std::os::fd::AsFd::as_fd(&f), 0, 8192, Default::default()).map_err(e)
}

/// Start this program as the responder half of a two-process benchmark (`remora bench
/// <args>` as a process of node `node`) and wait for the first line it prints, which must
/// start with `ready`; returns the child and the rest of that line. The child is killed
/// when the line does not come.
pub(crate) fn spawn_responder(node: u32, args: &[&str]) -> Result<(std::process::Child, String), String> {
    let exe = std::env::current_exe().map_err(e)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.env("REMORA_NODE", node.to_string()).arg("bench").args(args);
    spawn_ready(cmd)
}

/// Start `cmd` with its stdout piped and wait for the first line it prints, which must
/// start with `ready`; returns the child and the rest of that line. The child is killed
/// when the line does not come. Later output on the pipe is not read.
pub(crate) fn spawn_ready(cmd: std::process::Command) -> Result<(std::process::Child, String), String> {
    spawn_lines(cmd).map(|(child, _, rest)| (child, rest))
}

/// The child's stdout, read line by line.
pub(crate) type Lines = std::io::BufReader<std::process::ChildStdout>;

/// [`spawn_ready`], keeping the child's stdout for the lines it prints later.
pub(crate) fn spawn_lines(
    mut cmd: std::process::Command,
) -> Result<(std::process::Child, Lines, String), String> {
    use std::io::BufRead as _;
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().map_err(e)?;
    let mut line = String::new();
    let Some(out) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("no child stdout".into());
    };
    let mut lines = std::io::BufReader::new(out);
    let got = lines.read_line(&mut line);
    match (got, line.trim().strip_prefix("ready")) {
        (Ok(_), Some(rest)) => Ok((child, lines, rest.trim().to_string())),
        (got, _) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("responder failed to start: {line:?} {:?}", got.err()))
        }
    }
}

/// A row of two times given in nanoseconds, shown in microseconds.
pub(crate) fn row_us(name: &str, ours_ns: f64, theirs_ns: f64, target: &str) {
    row(
        name,
        format!("{:.1} µs", ours_ns / 1e3),
        format!("{:.1} µs", theirs_ns / 1e3),
        ours_ns / theirs_ns,
        target,
    );
}

/// `n` namespace hosts with the `remorad` the library would start (see
/// [`crate::daemon_binary`]).
///
/// # Errors
/// Why they cannot be made here (no remorad, not root, no iproute2).
pub(crate) fn netns_hosts(n: usize) -> Result<remora_netns::NetCluster, String> {
    let daemon = crate::daemon_binary()?;
    remora_netns::NetCluster::start(n, &daemon).map_err(|s| s.0)
}
