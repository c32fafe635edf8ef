//! Remora's configuration, read and validated in one place.
//!
//! Every `REMORA_*` variable that Remora's libraries and daemon read is a field of
//! [`Config`], read by [`Config::from_env`] and checked there; the cluster file is
//! [`cluster::Cluster`]. A bad value is refused with a [`ConfigError`] whose message names
//! the variable, the value and what is allowed, so a user never gets a bare error code for
//! a typo.
//!
//! ```
//! use remora_config::Config;
//! let cfg = Config::from_vars([("REMORA_NODE", "8"), ("REMORA_SPIN_US", "0")]).unwrap();
//! assert_eq!(cfg.node, 8);
//! assert_eq!(cfg.spin, std::time::Duration::ZERO);
//! let bad = Config::from_vars([("REMORA_NODE", "abc")]).unwrap_err();
//! assert!(bad.to_string().starts_with("REMORA_NODE=\"abc\""));
//! ```

pub mod cluster;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The node a process belongs to when `REMORA_NODE` is not set.
pub const DEFAULT_NODE: u32 = 4;
/// The largest node id.
pub const MAX_NODE: u32 = 65_535;

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: {allowed}")]
pub struct ConfigError {
    /// The variable (or cluster-file key).
    pub var: String,
    /// The value as given.
    pub value: String,
    /// What would be accepted.
    pub allowed: String,
}

impl ConfigError {
    fn new(var: &str, value: &str, allowed: impl Into<String>) -> ConfigError {
        ConfigError { var: var.into(), value: value.into(), allowed: allowed.into() }
    }
}

/// The DSM pager's timing (`REMORA_DSM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DsmTiming {
    /// `REMORA_DSM_FLUSH_US` (default 20): the longest a store to a map of another host's
    /// memory waits before it is sent home.
    pub flush: Duration,
    /// `REMORA_DSM_FLUSH_MIN_US` (default 10, at most `flush`): how often the pager looks at
    /// pages written lately.
    pub flush_min: Duration,
    /// `REMORA_DSM_SPIN_US` (default 50, at most 10000; 0: never): how long the pager keeps
    /// looking without sleeping after a lone store; up to 15 times longer when the last two
    /// lone stores came at most 500 µs apart (1.5 times their gap); never more than about
    /// 80% of the time, whatever the stores.
    pub spin: Duration,
    /// `REMORA_DSM_REFRESH_US` (default 1000): how often a map drops clean pages.
    pub refresh: Duration,
}

/// Everything the environment configures. See the README's environment table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `REMORA_NODE` (default 4): the node this process belongs to, 1..=65535.
    pub node: u32,
    /// `REMORA_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/remora`, else `/tmp/remora-<uid>`: where
    /// the nodes of this host meet.
    pub runtime_dir: PathBuf,
    /// `REMORA_DAEMON`: the `remorad` to start (searched for when unset).
    pub daemon: Option<PathBuf>,
    /// `REMORA_IDLE_EXIT` (seconds, default 30): how long a daemon started by the library
    /// lingers without clients.
    pub idle_exit: Duration,
    /// `REMORA_NO_SPAWN` (`1`: never start a daemon; `0` or unset: start one when none runs).
    pub spawn: bool,
    /// `REMORA_LOG` (default `info`): the daemon's log filter (`tracing` syntax).
    pub log: String,
    /// `REMORA_SPIN_US` (default 50, at most 1 s): how long interrupt and DMA waits spin
    /// before they block.
    pub spin: Duration,
    /// The DSM pager's timing.
    pub dsm: DsmTiming,
    /// `REMORA_PAGER_FLOWS` (`0`: DSM pagers, SCIF RMA and interrupt triggers across hosts
    /// go through the daemon instead of flows of their own).
    pub pager_flows: bool,
    /// `REMORA_URGENT` (`0`: pagers, pager-flow threads and the node daemon's event loop keep
    /// the default priority).
    pub urgent: bool,
    /// `REMORA_CLUSTER`: the cluster file (else `/etc/remora/cluster.toml` if it exists).
    pub cluster_file: Option<PathBuf>,
    /// `REMORA_BENCH_SPIN` (`1`: the DSM benchmark's pollers spin without yielding).
    pub bench_spin: bool,
    /// `REMORA_RSM_SEGMENTID_FILE` (default `/etc/rsm/rsm.segmentid`): the RSM segment-id
    /// reservations that `rsm_get_segmentid_range` reads.
    pub rsm_segmentid_file: PathBuf,
    /// `REMORA_METRICS_ADDR` (e.g. `127.0.0.1:9464`; unset: none): where `remorad` serves
    /// Prometheus metrics.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `REMORA_BENCH_SPREAD` (`1`: benchmarks print the parts of a reference as well).
    pub bench_spread: bool,
    /// `REMORA_VIPL_TRANSFER` (`auto`, `copy` or `dma`; default `auto`): how a VI moves
    /// payloads into its peer's memory.
    pub vipl_transfer: ViplTransfer,
    /// `REMORA_SCIF_QUEUE_BYTES` (default [`SCIF_QUEUE_DEFAULT`], MPSS's 4 KiB
    /// `SCIF_ENDPT_QP_SIZE`; any integer in [`SCIF_QUEUE_MIN`]..=[`SCIF_QUEUE_MAX`]): the
    /// size of a SCIF endpoint's receive queue, which, as MPSS's circular buffer, holds one
    /// byte less of payload (a sender gets at most 4095 bytes ahead of a peer that does not
    /// receive). Read by `remorad`, which sizes the connections it makes.
    pub scif_queue_bytes: usize,
    /// `REMORA_SCIF_DIRECT` (`0`: a SCIF connection between processes of two hosts carries
    /// its messages through both node daemons' relays instead of a TCP flow of its own
    /// between the two processes). Read by `remorad`: either end's daemon turns it off.
    pub scif_direct: bool,
    /// `REMORA_PAGER_POOL` (default [`PAGER_POOL_DEFAULT`], at most [`PAGER_POOL_MAX`];
    /// `0`: none): how many pager flows `remorad` keeps dialed and authenticated, bound to
    /// nothing, per peer node it has made a flow to, so a map, SCIF RMA, an interrupt
    /// connection or a direct flow across hosts only binds one.
    pub pager_pool: usize,
    /// `REMORA_TCP_CONGESTION` (`auto`, `system` or an algorithm's name such as `cubic`;
    /// default `auto`): the congestion control of the TCP transport's sockets. Read by
    /// `remorad`. See [`TcpCongestion`].
    pub tcp_congestion: TcpCongestion,
}

/// The congestion control of the TCP transport's sockets (`REMORA_TCP_CONGESTION`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TcpCongestion {
    /// [`LOCAL_CONGESTION`] on a link whose two ends run on one kernel (loopback, or two
    /// network namespaces of one machine, where no byte crosses a wire and pacing only
    /// slows the stream down); the machine's default on every other link.
    #[default]
    Auto,
    /// The machine's default (`net.ipv4.tcp_congestion_control`) on every link.
    System,
    /// This algorithm on every link (a name the kernel knows, `cubic`, `reno`, `bbr`...).
    Named(String),
}

impl TcpCongestion {
    /// The algorithm to set on a link's sockets, `None` for the machine's default;
    /// `same_kernel` when the peer runs on this kernel.
    pub fn for_link(&self, same_kernel: bool) -> Option<&str> {
        match self {
            TcpCongestion::Auto if same_kernel => Some(LOCAL_CONGESTION),
            TcpCongestion::Auto | TcpCongestion::System => None,
            TcpCongestion::Named(n) => Some(n),
        }
    }
}

/// The congestion control [`TcpCongestion::Auto`] sets on a link within one kernel: Linux's
/// own default, which does not pace. On loopback and veth, BBR (a common system default)
/// paces a long-lived stream at the rate it measured before, and so holds it to it:
/// Remora's 16 MiB transfers on loopback swung between 2 and 7 GB/s from run to run; a raw
/// 16 MiB stream ran 5.2-5.7 GB/s with BBR (quartiles 4.5-6.3) and 7.9-8.1 with CUBIC
/// (quartiles 7.7-8.2; 2026-11-29, two cores).
pub const LOCAL_CONGESTION: &str = "cubic";

/// The default `REMORA_PAGER_POOL`: none. A pooled flow saves the dial (~100 µs) where a
/// flow is waited for (SCIF maps and RMA, interrupt connections, direct flows, the first
/// access to a SISCI map, which itself no longer waits for its flow), while idle pooled
/// flows are standing descriptors and threads on both nodes, renewed every 60 s, and a
/// pooled flow no longer proves the home alive when it is taken; so it is for programs
/// that map and unmap other hosts' memory at a high rate.
pub const PAGER_POOL_DEFAULT: usize = 0;
/// The largest `REMORA_PAGER_POOL`.
pub const PAGER_POOL_MAX: usize = 16;

/// MPSS's SCIF endpoint queue size (`SCIF_ENDPT_QP_SIZE`); it holds one byte less.
pub const SCIF_QUEUE_DEFAULT: usize = 4096;
/// The smallest `REMORA_SCIF_QUEUE_BYTES`.
pub const SCIF_QUEUE_MIN: usize = 256;
/// The largest `REMORA_SCIF_QUEUE_BYTES` (16 MiB).
pub const SCIF_QUEUE_MAX: usize = 16 << 20;

/// How VIPL moves a payload into the peer's memory (`REMORA_VIPL_TRANSFER`), the two
/// modes of VIA2SISCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ViplTransfer {
    /// The same as [`ViplTransfer::Copy`] (it chose the DMA engine across hosts while
    /// that was the faster way there).
    #[default]
    Auto,
    /// A memory copy into a map where the peer shares this host's memory; where it is on
    /// another host, down the VI's channel to the peer's node (one stream, stores in order).
    Copy,
    /// Always the node's DMA engine.
    Dma,
}

/// The variables [`Config`] reads, for messages and tests.
pub const VARIABLES: &[&str] = &[
    "REMORA_NODE",
    "REMORA_RSM_SEGMENTID_FILE",
    "REMORA_METRICS_ADDR",
    "REMORA_RUNTIME_DIR",
    "REMORA_DAEMON",
    "REMORA_IDLE_EXIT",
    "REMORA_NO_SPAWN",
    "REMORA_LOG",
    "REMORA_SPIN_US",
    "REMORA_DSM_FLUSH_US",
    "REMORA_DSM_FLUSH_MIN_US",
    "REMORA_DSM_SPIN_US",
    "REMORA_DSM_REFRESH_US",
    "REMORA_PAGER_FLOWS",
    "REMORA_URGENT",
    "REMORA_CLUSTER",
    "REMORA_BENCH_SPIN",
    "REMORA_BENCH_SPREAD",
    "REMORA_VIPL_TRANSFER",
    "REMORA_SCIF_QUEUE_BYTES",
    "REMORA_SCIF_DIRECT",
    "REMORA_PAGER_POOL",
    "REMORA_TCP_CONGESTION",
];

/// A decimal integer in `lo..=hi`, written without sign, spaces or other characters.
fn integer(var: &str, v: &str, lo: u64, hi: u64, unit: &str) -> Result<u64, ConfigError> {
    let allowed = || format!("allowed: a decimal integer {lo}..={hi}{unit}");
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ConfigError::new(var, v, allowed()));
    }
    match v.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(ConfigError::new(var, v, allowed())),
    }
}

/// A switch that only `0` or `1` sets.
fn switch(var: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(ConfigError::new(var, v, "allowed: 0 or 1")),
    }
}

/// A path that is not empty.
fn path(var: &str, v: &str) -> Result<PathBuf, ConfigError> {
    if v.is_empty() || v.trim() != v {
        return Err(ConfigError::new(var, v, "allowed: a path, without surrounding spaces"));
    }
    Ok(PathBuf::from(v))
}

fn uid() -> u32 {
    // /proc/self/status carries the real uid; no libc needed.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|u| u.parse().ok()))
        })
        .unwrap_or(0)
}

impl Config {
    /// The configuration of this process's environment.
    ///
    /// # Errors
    /// The first variable whose value cannot be used.
    pub fn from_env() -> Result<Config, ConfigError> {
        let mut vars: Vec<(String, String)> = Vec::new();
        for name in VARIABLES.iter().chain(&["XDG_RUNTIME_DIR"]) {
            if let Some(v) = std::env::var_os(name) {
                vars.push((name.to_string(), v.to_string_lossy().into_owned()));
            }
        }
        Config::from_vars(vars)
    }

    /// The configuration that these variables give (names not listed in [`VARIABLES`],
    /// other than `XDG_RUNTIME_DIR`, are ignored).
    ///
    /// # Errors
    /// The first variable whose value cannot be used.
    pub fn from_vars<K: AsRef<str>, V: AsRef<str>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> =
            vars.into_iter().map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string())).collect();
        let get = |name: &str| vars.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let us = |name: &str, default: u64, hi: u64| -> Result<Duration, ConfigError> {
            match get(name) {
                Some(v) => integer(name, v, 0, hi, " (µs)").map(Duration::from_micros),
                None => Ok(Duration::from_micros(default)),
            }
        };
        let node = match get("REMORA_NODE") {
            Some(v) => integer("REMORA_NODE", v, 1, MAX_NODE as u64, "")? as u32,
            None => DEFAULT_NODE,
        };
        let runtime_dir = match (get("REMORA_RUNTIME_DIR"), get("XDG_RUNTIME_DIR")) {
            (Some(v), _) => path("REMORA_RUNTIME_DIR", v)?,
            (None, Some(x)) if !x.is_empty() => PathBuf::from(x).join("remora"),
            _ => PathBuf::from(format!("/tmp/remora-{}", uid())),
        };
        let flush = us("REMORA_DSM_FLUSH_US", 20, 1_000_000)?;
        let flush_min = us("REMORA_DSM_FLUSH_MIN_US", 10, 1_000_000)?.min(flush);
        Ok(Config {
            node,
            runtime_dir,
            daemon: get("REMORA_DAEMON").map(|v| path("REMORA_DAEMON", v)).transpose()?,
            idle_exit: match get("REMORA_IDLE_EXIT") {
                Some(v) => Duration::from_secs(integer("REMORA_IDLE_EXIT", v, 0, 31_536_000, " (seconds)")?),
                None => Duration::from_secs(30),
            },
            spawn: !get("REMORA_NO_SPAWN")
                .map(|v| switch("REMORA_NO_SPAWN", v))
                .transpose()?
                .unwrap_or(false),
            log: match get("REMORA_LOG") {
                Some(v) if v.trim().is_empty() => {
                    return Err(ConfigError::new(
                        "REMORA_LOG",
                        v,
                        "allowed: a tracing filter such as info or debug",
                    ))
                }
                Some(v) => v.to_string(),
                None => "info".into(),
            },
            spin: us("REMORA_SPIN_US", 50, 1_000_000)?,
            metrics_addr: match get("REMORA_METRICS_ADDR") {
                Some(v) => Some(v.parse().map_err(|_| {
                    ConfigError::new(
                        "REMORA_METRICS_ADDR",
                        v,
                        "allowed: an address and port such as 127.0.0.1:9464",
                    )
                })?),
                None => None,
            },
            vipl_transfer: match get("REMORA_VIPL_TRANSFER") {
                None | Some("auto") => ViplTransfer::Auto,
                Some("copy") => ViplTransfer::Copy,
                Some("dma") => ViplTransfer::Dma,
                Some(v) => {
                    return Err(ConfigError::new("REMORA_VIPL_TRANSFER", v, "allowed: auto, copy or dma"))
                }
            },
            scif_queue_bytes: match get("REMORA_SCIF_QUEUE_BYTES") {
                Some(v) => integer(
                    "REMORA_SCIF_QUEUE_BYTES",
                    v,
                    SCIF_QUEUE_MIN as u64,
                    SCIF_QUEUE_MAX as u64,
                    " (bytes)",
                )? as usize,
                None => SCIF_QUEUE_DEFAULT,
            },
            pager_pool: match get("REMORA_PAGER_POOL") {
                Some(v) => {
                    integer("REMORA_PAGER_POOL", v, 0, PAGER_POOL_MAX as u64, " (flows per peer)")? as usize
                }
                None => PAGER_POOL_DEFAULT,
            },
            tcp_congestion: match get("REMORA_TCP_CONGESTION") {
                None | Some("auto") => TcpCongestion::Auto,
                Some("system") => TcpCongestion::System,
                Some(v)
                    if (1..=15).contains(&v.len())
                        && v.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') =>
                {
                    TcpCongestion::Named(v.to_string())
                }
                Some(v) => {
                    return Err(ConfigError::new(
                        "REMORA_TCP_CONGESTION",
                        v,
                        "allowed: auto, system, or an algorithm's name of 1 to 15 lowercase letters, \
                         digits or underscores (such as cubic)",
                    ))
                }
            },
            scif_direct: get("REMORA_SCIF_DIRECT")
                .map(|v| switch("REMORA_SCIF_DIRECT", v))
                .transpose()?
                .unwrap_or(true),
            rsm_segmentid_file: match get("REMORA_RSM_SEGMENTID_FILE") {
                Some(v) => path("REMORA_RSM_SEGMENTID_FILE", v)?,
                None => PathBuf::from("/etc/rsm/rsm.segmentid"),
            },
            dsm: DsmTiming {
                flush,
                flush_min,
                spin: us("REMORA_DSM_SPIN_US", 50, 10_000)?,
                refresh: match us("REMORA_DSM_REFRESH_US", 1000, 60_000_000)? {
                    d if d.is_zero() => {
                        return Err(ConfigError::new(
                            "REMORA_DSM_REFRESH_US",
                            "0",
                            "allowed: a decimal integer 1..=60000000 (µs)",
                        ))
                    }
                    d => d,
                },
            },
            pager_flows: get("REMORA_PAGER_FLOWS")
                .map(|v| switch("REMORA_PAGER_FLOWS", v))
                .transpose()?
                .unwrap_or(true),
            urgent: get("REMORA_URGENT").map(|v| switch("REMORA_URGENT", v)).transpose()?.unwrap_or(true),
            cluster_file: get("REMORA_CLUSTER").map(|v| path("REMORA_CLUSTER", v)).transpose()?,
            bench_spin: get("REMORA_BENCH_SPIN")
                .map(|v| switch("REMORA_BENCH_SPIN", v))
                .transpose()?
                .unwrap_or(false),
            bench_spread: get("REMORA_BENCH_SPREAD")
                .map(|v| switch("REMORA_BENCH_SPREAD", v))
                .transpose()?
                .unwrap_or(false),
        })
    }

    /// This process's configuration, read once. Where the environment holds a bad value,
    /// the message is printed once on stderr (`remora: ...`) and the defaults stand in, so
    /// a knob read deep in a library never fails a call; the calls that start a session
    /// ([`Config::from_env`]) refuse the bad value with its error instead.
    pub fn get() -> &'static Config {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        CONFIG.get_or_init(|| match Config::from_env() {
            Ok(c) => c,
            Err(e) => {
                report(&e);
                Config::from_vars(std::iter::empty::<(&str, &str)>()).expect("the defaults are valid")
            }
        })
    }
}

/// Print `e` on stderr once per process (prefix `remora: `): a library that refuses a bad
/// value says why where a person sees it, beside the error code the API returns.
pub fn report(e: &ConfigError) {
    static SAID: OnceLock<()> = OnceLock::new();
    SAID.get_or_init(|| eprintln!("remora: {e}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(vars: &[(&str, &str)]) -> String {
        Config::from_vars(vars.iter().copied()).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let c = Config::from_vars([("XDG_RUNTIME_DIR", "/run/user/7")]).unwrap();
        assert_eq!(c.node, 4);
        assert_eq!(c.runtime_dir, PathBuf::from("/run/user/7/remora"));
        assert_eq!(c.idle_exit, Duration::from_secs(30));
        assert!(c.spawn && c.pager_flows && c.urgent && c.scif_direct);
        assert_eq!(c.spin, Duration::from_micros(50));
        assert_eq!(c.dsm.flush, Duration::from_micros(20));
        assert_eq!(c.dsm.flush_min, Duration::from_micros(10));
        assert_eq!(c.dsm.refresh, Duration::from_millis(1));
        assert_eq!(c.log, "info");
        assert!(c.cluster_file.is_none() && c.daemon.is_none());
        assert_eq!(c.scif_queue_bytes, 4096);
    }

    #[test]
    fn scif_queue_bytes_are_checked() {
        for (v, n) in [("256", 256), ("16384", 16384), ("5000", 5000), ("16777216", 16 << 20)] {
            assert_eq!(Config::from_vars([("REMORA_SCIF_QUEUE_BYTES", v)]).unwrap().scif_queue_bytes, n);
        }
        for bad in ["255", "0", "16777217", "4k", "", " 4096", "-1", "0x1000"] {
            let m = err(&[("REMORA_SCIF_QUEUE_BYTES", bad)]);
            assert_eq!(
                m,
                format!("REMORA_SCIF_QUEUE_BYTES={bad:?}: allowed: a decimal integer 256..=16777216 (bytes)")
            );
        }
    }

    #[test]
    fn node_ids_are_checked() {
        assert_eq!(Config::from_vars([("REMORA_NODE", "65535")]).unwrap().node, 65535);
        for bad in ["abc", "0", "65536", "", " 8", "8 ", "-4", "+4", "0x10", "4.0"] {
            let m = err(&[("REMORA_NODE", bad)]);
            assert!(
                m.starts_with(&format!("REMORA_NODE={bad:?}: allowed: a decimal integer 1..=65535")),
                "{m}"
            );
        }
    }

    #[test]
    fn every_number_names_its_unit_and_range() {
        for var in ["REMORA_SPIN_US", "REMORA_DSM_FLUSH_US", "REMORA_DSM_FLUSH_MIN_US", "REMORA_DSM_SPIN_US"]
        {
            let m = err(&[(var, "fast")]);
            assert!(m.contains(var) && m.contains("(µs)") && m.contains("\"fast\""), "{m}");
            assert!(Config::from_vars([(var, "2000000")]).is_err());
        }
        assert!(err(&[("REMORA_IDLE_EXIT", "1m")]).contains("(seconds)"));
        assert!(err(&[("REMORA_DSM_REFRESH_US", "0")]).contains("1..="));
        // The pager's spin is at most 10 ms.
        let c = Config::from_vars([("REMORA_DSM_SPIN_US", "10000")]).unwrap();
        assert_eq!(c.dsm.spin, Duration::from_millis(10));
        let m = err(&[("REMORA_DSM_SPIN_US", "10001")]);
        assert!(
            m.starts_with("REMORA_DSM_SPIN_US=\"10001\": allowed: a decimal integer 0..=10000 (µs)"),
            "{m}"
        );
        // flush_min never exceeds flush.
        let c = Config::from_vars([("REMORA_DSM_FLUSH_US", "5"), ("REMORA_DSM_FLUSH_MIN_US", "40")]).unwrap();
        assert_eq!(c.dsm.flush_min, Duration::from_micros(5));
    }

    #[test]
    fn switches_and_paths() {
        assert!(!Config::from_vars([("REMORA_NO_SPAWN", "1")]).unwrap().spawn);
        assert!(!Config::from_vars([("REMORA_URGENT", "0")]).unwrap().urgent);
        assert!(!Config::from_vars([("REMORA_PAGER_FLOWS", "0")]).unwrap().pager_flows);
        assert!(!Config::from_vars([("REMORA_SCIF_DIRECT", "0")]).unwrap().scif_direct);
        assert_eq!(Config::from_vars([("REMORA_LOG", "info")]).unwrap().pager_pool, PAGER_POOL_DEFAULT);
        assert_eq!(Config::from_vars([("REMORA_PAGER_POOL", "0")]).unwrap().pager_pool, 0);
        assert_eq!(Config::from_vars([("REMORA_PAGER_POOL", "16")]).unwrap().pager_pool, 16);
        for bad in ["17", "-1", "two", ""] {
            let m = err(&[("REMORA_PAGER_POOL", bad)]);
            assert_eq!(
                m,
                format!("REMORA_PAGER_POOL={bad:?}: allowed: a decimal integer 0..=16 (flows per peer)")
            );
        }
        assert_eq!(err(&[("REMORA_NO_SPAWN", "yes")]), "REMORA_NO_SPAWN=\"yes\": allowed: 0 or 1");
        assert!(err(&[("REMORA_RUNTIME_DIR", "")]).starts_with("REMORA_RUNTIME_DIR=\"\""));
        assert!(err(&[("REMORA_DAEMON", " /x")]).starts_with("REMORA_DAEMON"));
        assert!(err(&[("REMORA_LOG", " ")]).starts_with("REMORA_LOG"));
        let c = Config::from_vars([("REMORA_CLUSTER", "/etc/c.toml"), ("REMORA_RUNTIME_DIR", "/r")]).unwrap();
        assert_eq!(c.cluster_file, Some(PathBuf::from("/etc/c.toml")));
        assert_eq!(c.runtime_dir, PathBuf::from("/r"));
    }

    #[test]
    fn the_congestion_control_is_auto_system_or_a_name() {
        let cc = |v: &str| Config::from_vars([("REMORA_TCP_CONGESTION", v)]).map(|c| c.tcp_congestion);
        let auto = Config::from_vars([("REMORA_LOG", "info")]).unwrap().tcp_congestion;
        assert_eq!(auto, TcpCongestion::Auto);
        assert_eq!(cc("auto").unwrap(), TcpCongestion::Auto);
        assert_eq!((auto.for_link(true), auto.for_link(false)), (Some(LOCAL_CONGESTION), None));
        let system = cc("system").unwrap();
        assert_eq!((system.for_link(true), system.for_link(false)), (None, None));
        let named = cc("bbr").unwrap();
        assert_eq!((named.for_link(true), named.for_link(false)), (Some("bbr"), Some("bbr")));
        for bad in ["", "Cubic", "cu bic", "a_name_too_long_x", "../x"] {
            let m = err(&[("REMORA_TCP_CONGESTION", bad)]);
            assert!(m.starts_with(&format!("REMORA_TCP_CONGESTION={bad:?}: allowed: auto, system")), "{m}");
        }
    }
}
