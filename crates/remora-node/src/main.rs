//! `remorad`: the Remora node daemon.

use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

/// The Remora node daemon: plays one node (adapter and driver) of a Remora cluster.
#[derive(Parser, Debug)]
#[command(name = "remorad", version)]
struct Args {
    /// The node id (default: REMORA_NODE, else 4).
    #[arg(long)]
    node: Option<u32>,
    /// The runtime directory (default: REMORA_RUNTIME_DIR, else $XDG_RUNTIME_DIR/remora,
    /// else `/tmp/remora-<uid>`).
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// Exit after this many seconds without clients (0: never).
    #[arg(long, default_value_t = 0)]
    idle_exit: u64,
    /// Started by the library (shown by `remora status`).
    #[arg(long, hide = true)]
    auto: bool,
    /// The cluster file (default: REMORA_CLUSTER, else /etc/remora/cluster.toml if it
    /// exists; without one the node knows only the nodes of its own host).
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Start the daemon in the background (in its own process group) and return once it
    /// listens (exit 0), or as soon as it fails to start (exit 1; the reason is in
    /// node-N.log), at most 10 s.
    #[arg(long)]
    detach: bool,
    /// Serve Prometheus metrics at this address, e.g. 127.0.0.1:9464 (default:
    /// REMORA_METRICS_ADDR, else none).
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
    /// Log one JSON object a line (for log collectors) instead of plain text.
    #[arg(long)]
    log_json: bool,
    /// Print this program's manual page (roff) and exit.
    #[arg(long, hide = true)]
    man: bool,
}

/// Print the manual page generated from the command-line definition.
fn print_man() -> ! {
    use clap::CommandFactory;
    let mut out = Vec::new();
    let code = match clap_mangen::Man::new(Args::command()).section("8").render(&mut out) {
        Ok(()) => {
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(&out);
            0
        }
        Err(e) => {
            eprintln!("remorad: {e}");
            1
        }
    };
    std::process::exit(code)
}

/// Re-run this program without `--detach` as a grandchild of the caller: the caller reaps
/// us once the daemon is up (or failed to start: [`wait_until_up`]) and the daemon is
/// adopted by init, so it leaves no zombie behind. The daemon
/// gets no terminal: its input is `/dev/null` and its output goes, as plain text, to
/// `node-N.log` in the runtime directory.
fn detach(runtime_dir: &std::path::Path, node: u32) -> ! {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("remorad"));
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--detach").collect();
    if let Err(e) = remora_proto::paths::ensure_dir(runtime_dir) {
        eprintln!("remorad: cannot detach: runtime directory {}: {e}", runtime_dir.display());
        std::process::exit(1);
    }
    let log_path = runtime_dir.join(format!("node-{node}.log"));
    let log = match std::fs::OpenOptions::new().create(true).append(true).open(&log_path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("remorad: cannot detach: log file {}: {e}", log_path.display());
            std::process::exit(1);
        }
    };
    let out = match log.try_clone() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("remorad: cannot detach: {e}");
            std::process::exit(1);
        }
    };
    let sock = remora_proto::paths::socket_path(runtime_dir, node);
    let stale = socket_identity(&sock);
    let child = std::process::Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(log)
        .process_group(0)
        .spawn();
    match child {
        Ok(child) => std::process::exit(wait_until_up(child, &sock, stale)),
        Err(e) => {
            eprintln!("remorad: cannot detach: {e}");
            std::process::exit(1);
        }
    }
}

/// How long `--detach` waits for its daemon to be up before it returns anyway.
const DETACH_WAIT: Duration = Duration::from_secs(10);

/// Which socket file is at `sock`, if one is: device, inode and change time (a socket
/// made anew after the old one was removed differs in one of them, even where the inode
/// number is reused).
fn socket_identity(sock: &std::path::Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::symlink_metadata(sock).ok().filter(|m| m.file_type().is_socket())?;
    Some((m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

/// Wait until the detached daemon `child` listens at `sock` (it does once its transports are
/// open) — a socket other than `stale`, the one a daemon that died left there —, or has
/// exited: the exit code `--detach` returns. A daemon that failed to start (its reason is
/// in its log) makes it fail at once, so the library that started it says why instead of
/// waiting for a socket that will not come; one that found its node already served exits
/// with 0.
fn wait_until_up(
    mut child: std::process::Child,
    sock: &std::path::Path,
    stale: Option<(u64, u64, i64, i64)>,
) -> i32 {
    let start = std::time::Instant::now();
    let mut pause = Duration::from_micros(100);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return 0,
            Ok(Some(status)) => {
                eprintln!("remorad: the daemon exited at start ({status})");
                return 1;
            }
            Ok(None) => {}
            // Not ours to wait for any more: the socket tells.
            Err(_) if start.elapsed() > DETACH_WAIT => return 0,
            Err(_) => {}
        }
        let up = socket_identity(sock).is_some_and(|now| Some(now) != stale);
        if up || start.elapsed() > DETACH_WAIT {
            return 0;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

/// Where the log goes: standard error, save that a line which would take a log file past
/// the file size limit (`ulimit -f`, which a daemon the library starts inherits from the
/// program) is dropped: writing it would raise `SIGXFSZ`, which ends the daemon. A log of
/// earlier runs already past the limit ended it at its first line.
struct LogOut;

impl std::io::Write for LogOut {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let err = std::io::stderr();
        if let (Some(limit), Ok(st)) =
            (remora_sys::memfd::file_size_limit(), rustix::fs::fstat(std::os::fd::AsFd::as_fd(&err)))
        {
            // A regular file (appended to: the write lands at its end) is limited; a pipe
            // or a terminal is not.
            let file = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile;
            if file && (st.st_size as u64).saturating_add(b.len() as u64) > limit {
                return Ok(b.len());
            }
        }
        err.lock().write(b)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn main() {
    let env = match remora_config::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("remorad: {e}");
            std::process::exit(2);
        }
    };
    let filter = match tracing_subscriber::EnvFilter::try_new(&env.log) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("remorad: REMORA_LOG={:?}: not a log filter ({e}; allowed: e.g. info, debug)", env.log);
            std::process::exit(2);
        }
    };
    let args = Args::parse();
    // Colours only for a terminal: a log file gets plain text (or JSON with --log-json).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt().with_env_filter(filter).with_writer(|| LogOut);
    if args.log_json {
        fmt.json().init();
    } else {
        fmt.with_ansi(ansi).init();
    }
    if args.man {
        print_man();
    }
    let node = args.node.unwrap_or(env.node);
    if node == 0 || node > remora_config::MAX_NODE {
        eprintln!("remorad: --node {node}: allowed: 1..={}", remora_config::MAX_NODE);
        std::process::exit(2);
    }
    let runtime_dir = args.runtime_dir.clone().unwrap_or_else(|| env.runtime_dir.clone());
    if args.detach {
        detach(&runtime_dir, node);
    }
    let mut cfg = remora_node::Config::new(node, runtime_dir);
    cfg.idle_exit = (args.idle_exit > 0).then(|| Duration::from_secs(args.idle_exit));
    cfg.auto_started = args.auto;
    cfg.metrics = args.metrics.or(env.metrics_addr);
    let cluster = match &args.cluster {
        Some(p) => remora_node::cluster::Cluster::load(p).map(Some),
        None => remora_node::cluster::Cluster::find(&env),
    };
    cfg.cluster = match cluster {
        Ok(c) => c,
        Err(e) => {
            eprintln!("remorad: {e}");
            std::process::exit(2);
        }
    };
    if let Some(c) = &cfg.cluster {
        if c.addr(node).is_none() {
            eprintln!("remorad: node {node} is not in the cluster file");
            std::process::exit(2);
        }
    }
    match remora_node::run(cfg) {
        Ok(()) => {}
        Err(remora_node::StartError::AlreadyRunning(n)) => {
            eprintln!("remorad: node {n} already has a daemon");
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("remorad: {e}");
            std::process::exit(1);
        }
    }
}
