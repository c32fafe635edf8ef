//! `remora`: the command line of a Remora host.
//!
//! `remora status` shows the nodes of this host with their sessions, segments, connections
//! and maps; `remora shutdown` stops daemons; `remora install` lays out headers, libraries and
//! binaries for C programs; `remora bench` measures Remora beside its raw reference.

mod bench;
mod diag;
mod install;
mod soak;
mod status;
mod top;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The command line of a Remora host.
#[derive(Parser, Debug)]
#[command(name = "remora", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Show the nodes on this host: segments, connections and maps.
    Status {
        /// Print every node's status as JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Check what a node needs from this machine, one verdict a line (like dis_diag).
    Diag,
    /// A live view of this host's nodes, segments and links, refreshed once a second.
    Top {
        /// Print one frame as text and exit (for scripts).
        #[arg(long)]
        once: bool,
    },
    /// Ask a node whether it answers (like SCIProbeNode).
    Probe {
        /// The node to probe.
        node: u32,
    },
    /// Stop node daemons.
    Shutdown {
        /// The node to stop (default: REMORA_NODE, else 4).
        #[arg(long, conflicts_with = "all")]
        node: Option<u32>,
        /// Stop every node of this host.
        #[arg(long)]
        all: bool,
    },
    /// Install headers, the four C libraries, pkg-config files and binaries under a prefix.
    ///
    /// Headers go to PREFIX/include (and include/dis), the libraries to PREFIX/lib64 (Dolphin's
    /// layout) with links to them in PREFIX/lib (where C compilers and the runtime loader
    /// look), the binaries to PREFIX/bin, pkg-config files to PREFIX/share/pkgconfig and
    /// PREFIX/lib64/pkgconfig.
    ///
    /// Where the system's ld.so.conf lists PREFIX/lib (/usr/local on Debian and most
    /// distributions) or PREFIX/lib64 (a copied remora.conf), an install as root runs
    /// ldconfig, and a program builds and runs with `cc prog.c -lvipl` (or -lsisci, -lscif,
    /// -lrsm); as another user it says to run `sudo ldconfig`. For another prefix it touches
    /// nothing outside PREFIX: programs are built with -I PREFIX/include -L PREFIX/lib
    /// -Wl,-rpath,PREFIX/lib (or pkg-config),
    /// and it writes PREFIX/etc/ld.so.conf.d/remora.conf for a system that wants those
    /// libraries found without a run path (copy it to /etc/ld.so.conf.d and run ldconfig).
    /// The summary prints the commands.
    ///
    /// Every file and link is written under a temporary name and renamed into place (a link
    /// already there is replaced, never written through), then recorded in
    /// PREFIX/share/remora/install-manifest; `--uninstall` removes them (and the directories
    /// it made, once empty). It refuses a manifest that names a path outside PREFIX, and
    /// leaves alone an entry whose directory leads out of PREFIX through a symbolic link;
    /// an install refuses to write where a directory of PREFIX is a link leading out of it.
    /// A file already there that no earlier install wrote (e.g. a vendor's lib64/libsisci.so)
    /// is replaced and named in the summary ("replaced: PATH"): `--uninstall` removes it too.
    Install {
        /// The prefix (e.g. /usr/local or /opt/DIS).
        #[arg(long)]
        prefix: PathBuf,
        /// Install the binaries and libraries as built, debug information included
        /// (by default it is split off into `.debug/` beside each file).
        #[arg(long)]
        no_strip: bool,
        /// Remove what an earlier install under the prefix wrote (its manifest says what),
        /// and refresh the loader's cache where the install did (a remora.conf copied to
        /// /etc/ld.so.conf.d is named, for you to remove).
        #[arg(long, conflicts_with = "no_strip")]
        uninstall: bool,
    },
    /// Measure Remora beside its raw reference in the same run; each row says whether it
    /// meets its target, and a summary of every target ends the run.
    Bench {
        /// Also write every row (figures, ratio, target, verdict) as JSON to this file.
        #[arg(long, global = true)]
        json: Option<PathBuf>,
        /// Also draw every family of rows measured at several message sizes, Remora beside
        /// its reference, as SVG files in this directory.
        #[arg(long, global = true)]
        plot: Option<PathBuf>,
        #[command(subcommand)]
        which: bench::Which,
    },
    /// A chaos soak: node daemons (on this host, or on two namespace hosts with `--netns`)
    /// and worker processes doing random SISCI, SCIF, RSM and VIPL operations with every
    /// byte checked, while workers and daemons are killed, daemons stopped and cables
    /// pulled; fails on corrupt bytes, hung calls, late events or leaked resources.
    Soak(soak::SoakArgs),
    /// One worker process of `remora soak` (started by it).
    #[command(hide = true)]
    SoakWorker(soak::worker::WorkerArgs),
}

/// The `remorad` to start for namespace hosts: the one the library would start
/// (`REMORA_DAEMON`, else beside this program, in its prefix's `bin`, or on `PATH`).
///
/// # Errors
/// None is found; the message says where it looked and how to build one.
pub(crate) fn daemon_binary() -> Result<PathBuf, String> {
    let cfg = remora_client::Config::from(remora_config::Config::get());
    remora_client::find_daemon(&cfg).filter(|p| p.is_file()).ok_or_else(|| {
        "no remorad beside this program, in its prefix's bin or on PATH, and REMORA_DAEMON is unset \
         (build it: cargo build -p remora-node)"
            .to_string()
    })
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Status { json: false } => status::status(),
        Cmd::Status { json: true } => status::status_json(),
        Cmd::Probe { node } => status::probe(node),
        Cmd::Diag => diag::diag(),
        Cmd::Top { once } => top::top(once),
        Cmd::Shutdown { node, all } => status::shutdown(node, all),
        Cmd::Install { prefix, uninstall: true, .. } => install::uninstall(&prefix),
        Cmd::Install { prefix, no_strip, uninstall: false } => install::install(&prefix, !no_strip),
        Cmd::Bench { which, json, plot } => bench::run(which, json.as_deref(), plot.as_deref()),
        Cmd::Soak(a) => soak::run(a),
        Cmd::SoakWorker(a) => soak::worker::run(a),
    };
    if let Err(e) = r {
        eprintln!("remora: {e}");
        std::process::exit(1);
    }
}
