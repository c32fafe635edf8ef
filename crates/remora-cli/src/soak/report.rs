//! The soak's tally (what the workers said, line by line) and the summary printed at the
//! end, with its verdict.

use super::checks::Resources;
use super::schedule::{Fault, FaultKind, Observation};
use std::collections::BTreeMap;

/// A corrupt or lost operation a worker reported.
#[derive(Debug, Clone)]
pub(crate) struct Incident {
    /// The worker.
    pub(crate) worker: u32,
    /// The operation and what was wrong, as the worker said it.
    pub(crate) line: String,
    /// When the operation started and ended (ms since the epoch).
    pub(crate) from_ms: u64,
    /// See `from_ms`.
    pub(crate) to_ms: u64,
    /// Bytes that differ (0 for a lost event).
    pub(crate) bytes: u64,
}

/// Everything the workers said.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// The last counters of each incarnation of each worker.
    pub(crate) stats: BTreeMap<(u32, u32), BTreeMap<String, u64>>,
    /// Bytes that differed.
    pub(crate) corrupt: Vec<Incident>,
    /// Events that never came.
    pub(crate) lost: Vec<Incident>,
    /// Calls past their limit: worker and what it said.
    pub(crate) hung: Vec<String>,
    /// Incarnations that ended their run normally.
    pub(crate) done: usize,
}

impl Tally {
    /// Take one line of worker `w`'s incarnation `inc`.
    pub(crate) fn line(&mut self, w: u32, inc: u32, line: &str) {
        let mut it = line.split_whitespace();
        match it.next() {
            Some("STAT") => {
                let m = self.stats.entry((w, inc)).or_default();
                for kv in it {
                    if let Some((k, v)) = kv.split_once('=') {
                        m.insert(k.to_string(), v.parse().unwrap_or(0));
                    }
                }
            }
            Some(kind @ ("CORRUPT" | "LOST")) => {
                let op = it.next().unwrap_or("?").to_string();
                let from_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
                let to_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(u64::MAX);
                let bytes =
                    if kind == "CORRUPT" { it.next().and_then(|v| v.parse().ok()).unwrap_or(0) } else { 0 };
                let rest: Vec<&str> = it.collect();
                let i =
                    Incident { worker: w, line: format!("{op} {}", rest.join(" ")), from_ms, to_ms, bytes };
                if kind == "CORRUPT" {
                    self.corrupt.push(i);
                } else {
                    self.lost.push(i);
                }
            }
            Some("HUNG") => self.hung.push(format!("worker {w}.{inc}: {}", line.trim_start_matches("HUNG "))),
            Some("DONE") => self.done += 1,
            _ => {}
        }
    }

    /// Every incarnation's counters summed.
    pub(crate) fn totals(&self) -> BTreeMap<String, u64> {
        let mut t = BTreeMap::new();
        for m in self.stats.values() {
            for (k, v) in m {
                *t.entry(k.clone()).or_default() += v;
            }
        }
        t
    }
}

/// Whether a fault's window overlaps `i`: any fault of a daemon or a cable for a lost
/// event, only one that excuses bytes ([`FaultKind::excuses_bytes`]) for corrupt ones (a
/// worker's SIGKILL touches only its own objects, which nobody checks after it).
fn under_fault(i: &Incident, faults: &[Fault], bytes: bool) -> bool {
    faults.iter().any(|f| {
        f.kind != FaultKind::KillWorker
            && (!bytes || f.kind.excuses_bytes())
            && f.from_ms <= i.to_ms
            && i.from_ms <= f.to_ms
    })
}

/// Failures that break a promise of the API whatever the fault (call and error as the
/// workers count them), with the promise.
const BROKEN: &[(&str, &str)] = &[
    ("SCIWaitForDMAQueue.Timeout", "a DMA in flight ends DONE, or ERROR once its link is silent"),
    ("VipSendWait.Timeout", "a reliable VI's send has completed when its post returns"),
];

/// What the summary needs besides the tally.
pub(crate) struct Summary<'a> {
    /// The run's header line.
    pub(crate) header: String,
    /// Faults injected.
    pub(crate) faults: &'a [Fault],
    /// Faults skipped, with why.
    pub(crate) skipped: &'a [String],
    /// The cluster's answers to the faults.
    pub(crate) observations: &'a [Observation],
    /// Per node: baseline, at the end, and what still differs.
    pub(crate) resources: &'a [(u32, Resources, Option<Resources>, Vec<String>)],
    /// Workers that had to be killed at the end.
    pub(crate) stuck_workers: usize,
}

/// Print the summary; the list of failed checks (empty: the soak passed).
pub(crate) fn print(t: &Tally, s: &Summary) -> Vec<String> {
    let mut failed = Vec::new();
    println!("{}", s.header);
    let totals = t.totals();
    println!("\noperations done, by kind:");
    let mut all = 0;
    for (k, v) in totals.iter().filter(|(k, _)| !k.starts_with("err:") && *k != "corrupt" && *k != "lost") {
        println!("  {k:<36} {v:>9}");
        if k.contains('.') && !k.ends_with("build") && !k.ends_with("remake") {
            all += v;
        }
    }
    println!("  {:<36} {all:>9}", "(checked operations in all)");
    println!("\nfailures the API reported (the documented outcomes of the faults), by call and error:");
    for (k, v) in totals.iter().filter(|(k, _)| k.starts_with("err:")) {
        println!("  {:<56} {v:>7}", &k[4..]);
    }
    println!("\nfaults injected, by kind:");
    let mut by: BTreeMap<FaultKind, usize> = BTreeMap::new();
    for f in s.faults {
        *by.entry(f.kind).or_default() += 1;
    }
    for (k, n) in &by {
        let targets: Vec<String> =
            s.faults.iter().filter(|f| f.kind == *k).map(|f| f.target.to_string()).collect();
        let of = if *k == FaultKind::KillWorker { "workers" } else { "nodes" };
        println!("  {:<36} {n:>5}   ({of} {})", k.name(), targets.join(", "));
    }
    for why in s.skipped {
        println!("  skipped: {why}");
    }
    println!("\nevents seen per fault, against what the API promises:");
    let mut whats: Vec<&str> = s.observations.iter().map(|o| o.what).collect();
    whats.dedup();
    whats.sort();
    whats.dedup();
    for what in whats {
        let o: Vec<&Observation> = s.observations.iter().filter(|o| o.what == what).collect();
        let mut ms: Vec<u128> = o.iter().filter_map(|o| o.took).map(|d| d.as_millis()).collect();
        ms.sort();
        let missing = o.len() - ms.len();
        let bound = o[0].bound;
        let late = o.iter().filter(|o| o.took.is_none_or(|d| d > o.bound)).count();
        let verdict = if late == 0 { "ok" } else { "LATE" };
        println!(
            "  {what}\n      {} times: {} ms median, {} ms max, {missing} never; promise within {} ms: {verdict}",
            o.len(),
            ms.get(ms.len() / 2).copied().unwrap_or(0),
            ms.last().copied().unwrap_or(0),
            bound.as_millis()
        );
        if late > 0 {
            failed.push(format!("{late} of {} '{what}' later than {} ms", o.len(), bound.as_millis()));
        }
    }
    println!("\ncalls against what the API promises whatever the fault:");
    for (call, promise) in BROKEN {
        let n = totals.get(&format!("err:{call}")).copied().unwrap_or(0);
        println!("  {call:<30} {n:>5}  (must be 0: {promise})");
        if n > 0 {
            failed.push(format!("{n} times {call}"));
        }
    }
    let (bad, excused): (Vec<&Incident>, Vec<&Incident>) =
        t.corrupt.iter().partition(|i| !under_fault(i, s.faults, true));
    let bytes: u64 = bad.iter().map(|i| i.bytes).sum();
    println!("\ncorrupt bytes: {bytes} (must be 0); operations that found any: {}", bad.len());
    for i in bad.iter().take(10) {
        println!("  worker {}: {}", i.worker, i.line);
    }
    if !bad.is_empty() {
        failed.push(format!("{bytes} corrupt bytes"));
    }
    if !excused.is_empty() {
        println!(
            "  and {} operations with bytes lost under a daemon fault although every call succeeded:",
            excused.len()
        );
        for i in excused.iter().take(10) {
            println!("    worker {}: {} ({} bytes)", i.worker, i.line, i.bytes);
        }
    }
    let (lost, lost_excused): (Vec<&Incident>, Vec<&Incident>) =
        t.lost.iter().partition(|i| !under_fault(i, s.faults, false));
    println!(
        "lost events (a trigger or send succeeded, nothing came, no fault near): {} (must be 0); {} under a daemon fault",
        lost.len(),
        lost_excused.len()
    );
    for i in lost.iter().take(10) {
        println!("  worker {}: {}", i.worker, i.line);
    }
    for i in lost_excused.iter().take(10) {
        let near: Vec<String> = s
            .faults
            .iter()
            .filter(|f| f.kind != FaultKind::KillWorker && f.from_ms <= i.to_ms && i.from_ms <= f.to_ms)
            .map(|f| {
                format!(
                    "{} of node {} at {:+} ms",
                    f.kind.name(),
                    f.target,
                    f.from_ms as i64 - i.from_ms as i64
                )
            })
            .collect();
        println!("  under a fault: worker {}: {} ({})", i.worker, i.line, near.join("; "));
    }
    if !lost.is_empty() {
        failed.push(format!("{} lost events", lost.len()));
    }
    println!("hung calls: {} (must be 0)", t.hung.len() + s.stuck_workers);
    for h in t.hung.iter().take(10) {
        println!("  {h}");
    }
    if s.stuck_workers > 0 {
        println!("  {} workers did not end by themselves and were killed", s.stuck_workers);
    }
    if !t.hung.is_empty() || s.stuck_workers > 0 {
        failed.push(format!("{} hung calls", t.hung.len() + s.stuck_workers));
    }
    println!("\ndaemon resources after every worker exited, against the baseline:");
    for (node, base, now, diff) in s.resources {
        println!("  node {node} baseline: {base}");
        match now {
            Some(now) => println!("  node {node} at end:   {now}"),
            None => println!("  node {node} at end:   not answering"),
        }
        if diff.is_empty() {
            println!("  node {node}: back to baseline");
        } else {
            println!("  node {node}: NOT back to baseline: {}", diff.join(", "));
            failed.push(format!("node {node} not back to baseline"));
        }
    }
    if failed.is_empty() {
        println!("\nsoak: PASS");
    } else {
        println!("\nsoak: FAIL: {}", failed.join("; "));
    }
    failed
}
