//! What a soak worker's operations share: the watched call, the counters, the keys of the
//! operations, and the lines said to the parent.

use super::rng::{op_key, Rng};
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
pub(crate) type Slot = Option<(&'static str, Instant, Duration, bool)>;

/// What a worker's operations share: the watched call, the counters, the operation keys.
pub(crate) struct Ctx {
    pub(crate) watch: Arc<Mutex<Slot>>,
    pub(crate) counts: BTreeMap<String, u64>,
    /// The run's seed.
    pub(crate) seed: u64,
    /// This worker's index.
    pub(crate) worker: u32,
    /// This worker's incarnation (it is restarted after a SIGKILL).
    pub(crate) incarnation: u32,
    pub(crate) op: u64,
    /// The worker's choices.
    pub(crate) rng: Rng,
    /// The nodes of the run.
    pub(crate) nodes: Vec<u32>,
    /// The configuration the environment gives (runtime directory, cluster file).
    pub(crate) base: remora_client::Config,
    /// Each node's runtime directory, in the order of `nodes` (empty: the environment's).
    pub(crate) dirs: Vec<std::path::PathBuf>,
}

impl Ctx {
    /// The client configuration of a process of `node` (its own runtime directory).
    pub(crate) fn cfg(&self, node: u32) -> remora_client::Config {
        let mut c = self.base.with_node(node);
        if let Some(d) = self.nodes.iter().position(|&n| n == node).and_then(|i| self.dirs.get(i)) {
            c.runtime_dir = d.clone();
        }
        c
    }

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

    /// Say the counts so far (`STAT`).
    pub(crate) fn stat(&self) {
        let parts: Vec<String> = self.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        say(&format!("STAT {}", parts.join(" ")));
    }
}
