//! `remora bench`: each Remora path beside its raw reference, in the same run, with ratios.
//!
//! * `pio`: one-way latency of a store into a mapped segment of another node of this host,
//!   seen by a polling peer (half a ping-pong round trip), beside the same ping-pong over a
//!   raw shared-memory file.
//! * `memcpy`: `SCIMemCpy` bandwidth into a mapped segment of another node beside `memcpy`
//!   between two buffers of the same size.
//! * `connect`: connect plus map of a segment of another node of this host.
//! * `intr`, `dma`, `dsm`, `scif`, `rsm`, `multicast`, `hosts`, `scale`: see their modules.

mod common;
mod dma;
mod dsm;
mod hosts;
mod hosts_rows;
mod intr;
mod iperf;
mod multicast;
mod multicast_hosts;
mod ofi;
mod pio;
mod plot;
mod rsm;
mod scale;
mod scif;
mod tcp;
mod verdict;
mod vipl;

use clap::Subcommand;
use dma::*;
use dsm::*;
use intr::*;
use pio::*;
use tcp::*;

/// Which benchmark.
#[derive(Subcommand, Debug)]
pub enum Which {
    /// Store-to-observe latency through a mapped segment of another node.
    Pio {
        /// Round trips per measured batch.
        #[arg(long, default_value_t = 2000)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 15)]
        rounds: u32,
    },
    /// SCIMemCpy bandwidth beside memcpy, 64 KiB to 64 MiB.
    Memcpy {
        /// Repetitions per size.
        #[arg(long, default_value_t = 9)]
        reps: u32,
    },
    /// Connect + map latency of a segment of another node on this host.
    Connect {
        /// Samples.
        #[arg(long, default_value_t = 300)]
        samples: u32,
    },
    /// Interrupt trigger-to-wake latency between two processes: the waiter blocked (on two
    /// cores, and both processes on one core) and spinning, beside raw futexes.
    Intr {
        /// Round trips per blocking batch.
        #[arg(long, default_value_t = 200)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
        /// In the blocked row, how long each side spins once woken before it triggers back,
        /// so that the other side sleeps by then (0: at once, where the raw reference on two
        /// idle cores finds the trigger before it sleeps).
        #[arg(long, default_value_t = 50)]
        pause_us: u64,
    },
    /// DMA bandwidth (64 KiB to 64 MiB) beside memcpy, and 8-byte post-to-completion latency.
    Dma {
        /// Repetitions per size.
        #[arg(long, default_value_t = 7)]
        reps: u32,
    },
    /// DSM across hosts (TCP on loopback): first touch, ping-pong through maps, stores to
    /// resident pages, each beside its raw reference.
    Dsm {
        /// Round trips for the ping-pong.
        #[arg(long, default_value_t = 300)]
        rounds: u32,
    },
    /// SCIF between two nodes of this host: 8-byte message latency (beside raw shared
    /// memory and UCX's `ucx_perftest`), RMA bandwidth beside memcpy, scif_mmap stores.
    Scif {
        /// Round trips per measured batch.
        #[arg(long, default_value_t = 20000)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 11)]
        rounds: u32,
    },
    /// RSM between two nodes of this host: map, put64 and put ping-pongs, 1 MiB put/get
    /// beside memcpy, barrier open+close and signal wake-up beside their SISCI counterparts.
    Rsm {
        /// Round trips per measured batch (at least 1).
        #[arg(long, default_value_t = 20000, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
        /// Repetitions of the 1 MiB transfers.
        #[arg(long, default_value_t = 21)]
        reps: u32,
    },
    /// VIPL between two nodes of this host: 8-byte send→receive latency beside raw shared
    /// memory, 64 KiB send and RDMA-write streams beside memcpy (memory-copy and DMA
    /// modes), and the same across two nodes joined over TCP beside raw TCP.
    Vipl {
        /// Round trips per measured batch.
        #[arg(long, default_value_t = 20000)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 7)]
        rounds: u32,
        /// Only the rows across two nodes joined over TCP.
        #[arg(long)]
        across_hosts: bool,
        /// Only the 8-byte rows on one host (VIPL, raw shared memory, SCIF).
        #[arg(long, conflicts_with = "across_hosts")]
        latency: bool,
    },
    /// Reflective memory: one store through a group's multicast map reaching 2 to 4
    /// members on nodes of this host, beside as many unicast stores; then one store and
    /// flush reaching members on two namespace hosts, beside a store into a map of each.
    Multicast {
        /// Stores per measured batch.
        #[arg(long, default_value_t = 100_000)]
        batch: u32,
        /// Batches of each kind (interleaved).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
    },
    /// Across two hosts (namespace hosts, else loopback TCP), each beside raw TCP between
    /// the same endpoints: 8-byte SCIF/interrupt/data-interrupt/DMA latency, DMA by size
    /// (write, read, vector), SCIMemCpy into a remote map, connect + map, 4 DMA queues and
    /// 4 SCIF RMA endpoints at once.
    Hosts {
        /// Samples of each kind (interleaved).
        #[arg(long, default_value_t = 9)]
        reps: u32,
        /// Two nodes joined over TCP on loopback even where namespace hosts can be made.
        #[arg(long)]
        loopback: bool,
        /// Only the 8-byte latency rows (SCIF message, interrupts, DMA of 8 bytes).
        #[arg(long)]
        latency: bool,
        /// Only these groups of rows, comma-separated: latency, bulk (DMA by size), copy
        /// (SCIMemCpy), connect, concurrent (4 DMA queues and 4 SCIF endpoints at once).
        #[arg(long, value_delimiter = ',', value_parser = ["latency", "bulk", "copy", "connect", "concurrent"])]
        only: Vec<String>,
    },
    /// All-to-all DMA between 2, 4 and 8 nodes (loopback TCP, then namespace hosts),
    /// aggregate bandwidth beside the raw TCP aggregate of the same pattern.
    Scale {
        /// MiB each node sends per round.
        #[arg(long, default_value_t = 64)]
        mib: u32,
    },
    /// The ofi transport (libfabric, `tcp;ofi_rxm`) between two network-namespace hosts,
    /// beside Remora's TCP transport, raw TCP and `fi_pingpong` (needs root, iproute2 and
    /// libfabric; not part of `all`).
    Ofi {
        /// Repetitions of each transfer.
        #[arg(long, default_value_t = 7)]
        reps: u32,
    },
    /// All of the above with their defaults.
    All,
    /// The raw TCP receiver of `ofi` (started by `ofi` in a host's namespace).
    #[command(hide = true)]
    OfiRawSink {
        #[arg(long)]
        bind: String,
    },
    /// The raw TCP sender of `ofi`.
    #[command(hide = true)]
    OfiRawSource {
        #[arg(long)]
        to: String,
        #[arg(long)]
        reps: u32,
    },
    /// The processes `hosts` and `scale` start on their hosts.
    #[command(hide = true)]
    HostsChild {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The responder half of `scif` (started by `scif` itself).
    #[command(hide = true)]
    ScifChild {
        #[arg(long)]
        raw_path: String,
        #[arg(long)]
        batch: u32,
        #[arg(long)]
        rounds: u32,
    },
    /// The responder half of `intr` (started by `intr` itself).
    #[command(hide = true)]
    IntrChild {
        #[arg(long)]
        raw_path: String,
        #[arg(long)]
        peer_node: u32,
        #[arg(long)]
        batch: u32,
        #[arg(long)]
        rounds: u32,
        #[arg(long)]
        pause_us: u64,
    },
    /// The responder half of `dsm`'s ping-pong (started by `dsm` itself).
    #[command(hide = true)]
    DsmChild {
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The cluster file (default: `cluster.toml` in `dir`).
        #[arg(long)]
        cluster: Option<std::path::PathBuf>,
        #[arg(long)]
        rounds: u32,
    },
    /// `dsm`'s loopback ping-pong and its raw TCP reference with every thread on one core
    /// (started by `dsm` itself, pinned): prints both medians in ns.
    #[command(hide = true)]
    DsmOneCore {
        #[arg(long)]
        rounds: u32,
    },
    /// Raw TCP echo for the across-hosts reference (started by `dsm` in a namespace).
    #[command(hide = true)]
    TcpEcho {
        #[arg(long)]
        bind: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        rounds: u32,
    },
    /// Raw TCP ping for the across-hosts reference: prints the median one-way in ns.
    #[command(hide = true)]
    TcpPing {
        #[arg(long)]
        to: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        rounds: u32,
    },
    /// The responder half of `pio` (started by `pio` itself).
    #[command(hide = true)]
    PioChild {
        #[arg(long)]
        raw_path: String,
        #[arg(long)]
        peer_node: u32,
        #[arg(long)]
        peer_seg: u32,
        #[arg(long)]
        own_seg: u32,
        #[arg(long)]
        batch: u32,
        #[arg(long)]
        rounds: u32,
    },
}

/// Run benchmark `w`, then print the summary of targets; with `json`, write every row
/// there; with `plot`, draw every family of rows measured at several sizes there as SVG.
pub fn run(w: Which, json: Option<&std::path::Path>, plot: Option<&std::path::Path>) -> Result<(), String> {
    let summarise = !matches!(
        w,
        Which::ScifChild { .. }
            | Which::IntrChild { .. }
            | Which::DsmChild { .. }
            | Which::TcpEcho { .. }
            | Which::TcpPing { .. }
            | Which::OfiRawSink { .. }
            | Which::OfiRawSource { .. }
            | Which::PioChild { .. }
            | Which::HostsChild { .. }
    );
    if summarise {
        let machine = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control");
        let machine = machine.as_deref().map_or("unknown", str::trim).to_string();
        let links = common::links_congestion().unwrap_or(&machine);
        println!(
            "TCP congestion control: {links} on Remora's links within this machine and on every raw TCP \
             reference (REMORA_TCP_CONGESTION); the machine's default: {machine}"
        );
    }
    let r = run_one(w);
    if summarise {
        verdict::summary();
        if let Some(path) = json {
            std::fs::write(path, verdict::json()).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        if let Some(dir) = plot {
            for f in plot::plots(&verdict::rows(), dir)? {
                println!("plot: {}", f.display());
            }
        }
    }
    r
}

fn run_one(w: Which) -> Result<(), String> {
    match w {
        Which::Pio { batch, rounds } => pio(batch, rounds),
        Which::Memcpy { reps } => memcpy(reps),
        Which::Connect { samples } => connect(samples),
        Which::Intr { batch, rounds, pause_us } => intr(batch, rounds, pause_us),
        Which::Dma { reps } => dma(reps),
        Which::Dsm { rounds } => dsm(rounds),
        Which::Ofi { reps } => ofi::ofi(reps),
        Which::OfiRawSink { bind } => ofi::raw_sink(&bind),
        Which::OfiRawSource { to, reps } => ofi::raw_source(&to, reps),
        Which::Scif { batch, rounds } => scif::scif(batch, rounds),
        Which::Rsm { batch, rounds, reps } => rsm::rsm(batch, rounds, reps),
        Which::Vipl { batch, rounds, across_hosts, latency } => {
            vipl::vipl(batch, rounds, across_hosts, latency)
        }
        Which::Multicast { batch, rounds } => multicast::multicast(batch, rounds),
        Which::Hosts { reps, loopback, latency, mut only } => {
            if latency {
                only.push("latency".into());
            }
            hosts::hosts(reps, !loopback, &only)
        }
        Which::Scale { mib } => scale::scale(mib),
        Which::HostsChild { args } => hosts_child(&args),
        Which::ScifChild { raw_path, batch, rounds } => scif::scif_child(&raw_path, batch, rounds),
        Which::All => {
            type Step = (&'static str, fn() -> Result<(), String>);
            let steps: [Step; 12] = [
                ("pio", || pio(2000, 15)),
                ("memcpy", || memcpy(9)),
                ("connect", || connect(300)),
                ("intr", || intr(200, 9, 50)),
                ("dma", || dma(7)),
                ("dsm", || dsm(300)),
                ("scif", || scif::scif(20000, 11)),
                ("rsm", || rsm::rsm(20000, 9, 21)),
                ("vipl", || vipl::vipl(20000, 7, false, false)),
                ("multicast", || multicast::multicast(100_000, 9)),
                ("hosts", || hosts::hosts(9, true, &[])),
                ("scale", || scale::scale(64)),
            ];
            // A bar on stderr while the long run goes (hidden when stderr is no terminal).
            let bar = indicatif::ProgressBar::new(steps.len() as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            for (name, run) in steps {
                bar.set_message(name);
                bar.suspend(run)?;
                bar.inc(1);
            }
            bar.finish_and_clear();
            Ok(())
        }
        Which::IntrChild { raw_path, peer_node, batch, rounds, pause_us } => {
            intr_child(&raw_path, peer_node, batch, rounds, pause_us)
        }
        Which::PioChild { raw_path, peer_node, peer_seg, own_seg, batch, rounds } => {
            pio_child(&raw_path, peer_node, peer_seg, own_seg, batch, rounds)
        }
        Which::DsmChild { dir, cluster, rounds } => dsm_child(&dir, cluster, rounds),
        Which::DsmOneCore { rounds } => dsm_one_core(rounds),
        Which::TcpEcho { bind, size, rounds } => tcp_echo(&bind, size, rounds),
        Which::TcpPing { to, size, rounds } => tcp_ping(&to, size, rounds),
    }
}

/// `remora bench hosts-child <role> <args…>`: the processes the parents start on hosts.
pub(crate) fn hosts_child(args: &[String]) -> Result<(), String> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let num = |s: &str| s.parse::<u32>().map_err(|_| format!("not a number: {s:?}"));
    match a.as_slice() {
        ["peer", bind] => hosts::peer(bind),
        ["active", to, sport, reps, rows, iperf, label @ ..] => {
            let sport = sport.parse::<u16>().map_err(|_| format!("not a port: {sport:?}"))?;
            hosts_rows::active(to, sport, num(reps)?, rows, iperf, &label.join(" "))
        }
        ["scale-node", k, n, mib, bind] => scale::node(num(k)?, num(n)?, num(mib)?, bind),
        _ => Err(format!("hosts-child: unknown arguments {a:?}")),
    }
}
