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

/// The congestion control Remora's TCP links run between two nodes of this machine
/// (`REMORA_TCP_CONGESTION`: `auto` sets [`remora_config::LOCAL_CONGESTION`] there), which
/// every raw TCP reference of the bench takes too: all of them run within this machine
/// (loopback or network namespaces), and a reference paced by another algorithm would
/// measure the kernel's pacing, not Remora's engine. `None`: the machine's default, also
/// where the kernel lacks or refuses the algorithm (the links then keep the default too).
pub(crate) fn links_congestion() -> Option<&'static str> {
    static TAKEN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let name = remora_config::Config::get().tcp_congestion.for_link(true)?;
    let taken = TAKEN.get_or_init(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .is_ok_and(|l| remora_sys::flow::set_congestion(std::os::fd::AsFd::as_fd(&l), name).is_ok())
    });
    taken.then_some(name)
}

/// Give a raw TCP reference's socket [`links_congestion`] (nothing when that is the
/// machine's default, or when the kernel refuses it: the reference then runs the
/// machine's default, as the links do).
pub(crate) fn like_links(s: &std::net::TcpStream) {
    if let Some(name) = links_congestion() {
        let _ = remora_sys::flow::set_congestion(std::os::fd::AsFd::as_fd(s), name);
    }
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

/// Like [`wait_for`], but gives the core away between looks: on this machine both "hosts"
/// share two cores, and a pure spinner on each would leave none for the threads that move
/// data between them (on two real hosts each has cores of its own).
///
/// It yields between looks, except while CPU-bound work (a compiler, a busy loop) shares its
/// core: then each `sched_yield` lets that work run on until the scheduler's next tick (the
/// yielder's deadline moves a whole slice later at every yield), up to 4 ms at 250 Hz per
/// look, so that a ping-pong polled this way takes milliseconds a trip (raw TCP polled with
/// yields does too). The looks then sleep instead ([`Kept`]): a thread woken from a sleep
/// gets the core before the busy one.
pub(crate) fn wait_yielding(word: &AtomicU64, want: u64) -> Result<(), String> {
    if remora_config::Config::get().bench_spin {
        return wait_for(word, want);
    }
    let t = Instant::now();
    while word.load(Ordering::Acquire) != want {
        if t.elapsed() > Duration::from_secs(10) {
            return Err("peer stopped answering".into());
        }
        give_way();
    }
    Ok(())
}

thread_local!(static KEPT: std::cell::Cell<Kept> = const { std::cell::Cell::new(Kept::NONE) });

/// A polling thread's pause between two looks ([`wait_yielding`]'s, and the raw TCP polling
/// reference's, so both poll alike): a yield, or a short sleep while CPU-bound work was
/// found on its core ([`Kept`]).
pub(crate) fn give_way() {
    let mut kept = KEPT.get();
    let y = Instant::now();
    if kept.sleeps(y) {
        std::thread::sleep(Duration::from_micros(1));
        return;
    }
    std::thread::yield_now();
    let back = Instant::now();
    kept.yielded(back - y, back);
    KEPT.set(kept);
}

/// Forget what this thread's yields found: every ping-pong starts polling as on a quiet
/// machine (a row must not inherit the sleeping looks of the row before it).
pub(crate) fn fresh_looks() {
    KEPT.set(Kept::NONE);
}

/// What a polling thread's yields found of its core ([`wait_yielding`]): two yields kept from
/// the core for [`YIELD_KEPT`] or more within [`KEPT_WITHIN`] found CPU-bound work there (the
/// other pollers' and helpers' turns are much shorter, and one such yield alone may be a
/// single time slice of another program); the looks sleep for [`SLEEP_FOR`] after that.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Kept {
    /// When the last yield kept from the core for long got it back.
    last: Option<Instant>,
    /// Until when the looks sleep instead of yielding.
    until: Option<Instant>,
}

/// A yield that gave the core away this long may have found CPU-bound work on it.
const YIELD_KEPT: Duration = Duration::from_millis(1);
/// Two such yields this close together did.
const KEPT_WITHIN: Duration = Duration::from_millis(20);
/// How long the looks sleep once such work was found (the default timer slack makes each
/// sleep about 50 µs); then they yield again, and find out whether it is still there.
const SLEEP_FOR: Duration = Duration::from_millis(50);

impl Kept {
    const NONE: Kept = Kept { last: None, until: None };

    /// Whether a look at `now` sleeps rather than yields.
    fn sleeps(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }

    /// A yield gave the core away for `waited` and got it back at `now`.
    fn yielded(&mut self, waited: Duration, now: Instant) {
        if waited < YIELD_KEPT {
            return;
        }
        *self = if self.last.is_some_and(|l| now.saturating_duration_since(l) <= KEPT_WITHIN) {
            Kept { last: None, until: Some(now + SLEEP_FOR) }
        } else {
            Kept { last: Some(now), until: None }
        };
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn two_long_yields_close_together_make_the_looks_sleep_for_a_while() {
        let (mut k, t) = (Kept::NONE, Instant::now());
        k.yielded(MS(4), t);
        assert!(!k.sleeps(t), "one long yield alone (another program's time slice)");
        k.yielded(Duration::from_micros(30), t + MS(1));
        assert!(!k.sleeps(t + MS(1)), "short yields are other pollers' turns");
        k.yielded(MS(4), t + MS(10));
        assert!(k.sleeps(t + MS(10)), "CPU-bound work on the core");
        assert!(k.sleeps(t + MS(10) + SLEEP_FOR - MS(1)));
        assert!(!k.sleeps(t + MS(10) + SLEEP_FOR), "then the looks yield again");
        // The two yields that found the work are spent: one more long yield alone is not.
        k.yielded(MS(4), t + MS(70));
        assert!(!k.sleeps(t + MS(70)));
    }

    #[test]
    fn long_yields_far_apart_never_make_the_looks_sleep() {
        let (mut k, t) = (Kept::NONE, Instant::now());
        for i in 0..10 {
            let now = t + (KEPT_WITHIN + MS(1)) * i;
            k.yielded(MS(2), now);
            assert!(!k.sleeps(now), "long yield {i}");
        }
    }
}
