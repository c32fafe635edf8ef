//! Multi-host Remora clusters on one machine, built from network namespaces (for tests,
//! benchmarks and soaks).
//!
//! A [`NetCluster`] builds `hosts` network namespaces joined by a Linux bridge that lives in a
//! namespace of its own, so the root namespace gets no interfaces, addresses or routes. Host
//! `k` (1-based) has `eth0` = `10.77.S.k/24` and runs one `remorad` as node `4 * k` on TCP
//! port [`PORT`], with its own runtime directory, so nodes of different hosts can only meet
//! over TCP. Everything is torn down when the `NetCluster` is dropped (also while a test
//! panics): daemons are killed by pid and namespaces deleted by name.
//!
//! Multi-host tests need root and iproute2; where they cannot run, [`NetCluster::start`]
//! returns a [`Skip`] that says why, and the test prints it and passes (the
//! `cluster_or_skip!` macro of `remora-testkit` does that):
//!
//! ```no_run
//! #[test]
//! fn two_hosts() {
//!     let cluster = remora_testkit::cluster_or_skip!(2);
//!     let out = cluster.command(1, "my-program").arg("8").output().unwrap();
//!     assert!(out.status.success());
//! }
//! ```
//!
//! Names are unique per process and instance, so tests of one binary (and several test
//! binaries) can run at the same time: namespaces are `rmr<pid>x<instance>h<k>` and
//! `rmr<pid>x<instance>sw`. Namespaces left behind by a test process that died without
//! unwinding (SIGKILL, abort) are removed by the next process that starts a cluster.

mod host;
mod reap;
mod stale;

use host::*;
pub use reap::wait_until;
use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The TCP port every node listens on (each host has its own address).
pub const PORT: u16 = 7400;

/// The heartbeat period written to the cluster file, in milliseconds.
pub const HEARTBEAT_MS: u64 = 200;

/// How long a daemon may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a daemon may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Temporary directories are `$TMPDIR/remora-netcluster-<pid>-XXXXXX`.
const TEMP_PREFIX: &str = "remora-netcluster-";

/// A kept temporary directory holds this file, so clean-up of leftovers spares it.
const KEEP_MARK: &str = "KEPT";

/// Why multi-host tests cannot run here (not root, no `ip`, namespaces unavailable, no
/// daemon). A test that gets one prints it and returns, passing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "multi-host test skipped: {}", self.0)
    }
}

impl std::error::Error for Skip {}

/// The `remorad` a test should use: `REMORA_DAEMON` if set, else the `remorad` of the
/// test's own target directory (`target/debug/remorad` for `target/debug/deps/test-…`).
/// A `remorad` found there that is older than its sources in the checkout gets a warning on
/// stderr, once per process (shown with a failing test's output).
///
/// # Errors
/// A [`Skip`] naming the missing file and how to build it.
pub fn find_daemon() -> Result<PathBuf, Skip> {
    let path = match &remora_config::Config::get().daemon {
        Some(p) => p.clone(),
        None => {
            let p = daemon_beside_test();
            static WARNED: Once = Once::new();
            WARNED.call_once(|| {
                if let Some(w) = stale::stale_daemon(&p) {
                    eprintln!("{w}");
                }
            });
            p
        }
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(Skip(format!("no remorad at {} (build it: cargo build -p remora-node)", path.display())))
    }
}

/// `current_exe()/../../remorad`: where cargo puts `remorad` for a test binary in
/// `target/<profile>/deps`. The file may not exist.
pub fn daemon_beside_test() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent().and_then(Path::parent).unwrap_or(Path::new(".")).join("remorad")
}

/// Per-process instance counter: part of every namespace name.
static INSTANCE: AtomicU32 = AtomicU32::new(0);
/// Serialises namespace and link creation within the process.
static SETUP: Mutex<()> = Mutex::new(());
/// Removes namespaces and directories of dead test processes, once per process.
static STALE: Once = Once::new();

#[derive(Debug)]
struct Host {
    ns: String,
    addr: String,
    runtime_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A cluster of hosts (network namespaces) on this machine, each with one `remorad`.
///
/// Hosts are numbered from 1; host `k` is node `4 * k`. Dropping it kills every daemon it
/// started, any process still running in its namespaces, and deletes the namespaces. Set
/// `REMORA_TESTKIT_KEEP=1` to keep the temporary directory (cluster file, runtime
/// directories, logs: `$TMPDIR/remora-netcluster-<pid>-XXXXXX`) for inspection; while a
/// test panics, the end of every daemon log is printed to stderr.
#[derive(Debug)]
pub struct NetCluster {
    ip: PathBuf,
    daemon: PathBuf,
    switch_ns: String,
    subnet: u8,
    hosts: Vec<Host>,
    /// Namespaces this instance created, in creation order.
    created: Vec<String>,
    secret: String,
    cluster_file: PathBuf,
    /// Lines added to the cluster file's top (e.g. `transport = "ofi+tcp"`).
    extra: String,
    dir: tempfile::TempDir,
}

impl NetCluster {
    /// The client configuration of a process of host `k` (its daemon already runs there;
    /// the library never starts another).
    pub fn client_config(&self, k: usize) -> remora_client::Config {
        remora_client::Config {
            node: self.node(k),
            runtime_dir: self.runtime_dir(k).to_path_buf(),
            daemon: None,
            spawn: false,
            idle_exit: Duration::from_secs(60),
            cluster: Some(self.cluster_file().to_path_buf()),
        }
    }

    /// Build `hosts` hosts joined by a bridge, write the cluster file and start one
    /// `daemon` (a `remorad`) per host; returns once every daemon listens on its socket.
    ///
    /// # Errors
    /// A [`Skip`] when multi-host tests cannot run here: not root, no `ip`, no `daemon`
    /// file, or the namespaces, veth pairs or bridge cannot be created.
    ///
    /// # Panics
    /// If `hosts` is not in `1..=250`, or a daemon exits or does not listen within 20 s
    /// (the message includes its log). Everything built so far is torn down first.
    pub fn start(hosts: usize, daemon: &Path) -> Result<NetCluster, Skip> {
        NetCluster::start_with(hosts, daemon, "")
    }

    /// [`NetCluster::start`] with `extra` lines at the top of the cluster file (keys that
    /// apply to every node, e.g. `transport = "ofi+tcp"`).
    ///
    /// # Errors
    /// As [`NetCluster::start`].
    ///
    /// # Panics
    /// As [`NetCluster::start`].
    pub fn start_with(hosts: usize, daemon: &Path, extra: &str) -> Result<NetCluster, Skip> {
        assert!((1..=250).contains(&hosts), "NetCluster::start: hosts must be 1..=250, not {hosts}");
        match effective_uid() {
            Some(0) => {}
            Some(uid) => {
                return Err(Skip(format!("not root (euid {uid}); network namespaces need CAP_NET_ADMIN")))
            }
            None => return Err(Skip("cannot read the effective uid from /proc/self/status".into())),
        }
        let ip = find_ip().ok_or_else(|| Skip("the iproute2 `ip` command is not installed".into()))?;
        if !daemon.is_file() {
            return Err(Skip(format!(
                "no remorad at {} (build it: cargo build -p remora-node)",
                daemon.display()
            )));
        }
        let daemon = fs::canonicalize(daemon).unwrap_or_else(|_| daemon.to_path_buf());
        STALE.call_once(|| remove_leftovers(&ip));

        let pid = std::process::id();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}{pid}-"))
            .tempdir()
            .map_err(|e| Skip(format!("cannot create a temporary directory: {e}")))?;
        let base = fs::canonicalize(dir.path()).unwrap_or_else(|_| dir.path().to_path_buf());
        let mut cluster = NetCluster {
            ip,
            daemon,
            switch_ns: String::new(),
            subnet: 0,
            hosts: Vec::new(),
            created: Vec::new(),
            secret: random_hex(16),
            extra: extra.to_string(),
            cluster_file: base.join("cluster.toml"),
            dir,
        };

        {
            let _guard = SETUP.lock().unwrap_or_else(|p| p.into_inner());
            // The switch namespace claims the name prefix; on a clash (a leftover of an
            // earlier process with our pid that could not be removed) take the next one.
            let mut attempts = 0;
            let instance = loop {
                let instance = INSTANCE.fetch_add(1, Ordering::Relaxed);
                let name = format!("rmr{pid}x{instance}sw");
                match cluster.run_ip(&["netns", "add", &name]) {
                    Ok(()) => {
                        cluster.created.push(name.clone());
                        cluster.switch_ns = name;
                        break instance;
                    }
                    Err(e) if e.contains("File exists") && attempts < 20 => attempts += 1,
                    Err(e) => return Err(Skip(format!("cannot create a network namespace: {e}"))),
                }
            };
            cluster.subnet = ((u64::from(pid) * 7 + u64::from(instance)) % 250) as u8;
            cluster.build_network(hosts, instance, &base)?;
        }
        cluster.write_cluster_file().map_err(|e| Skip(format!("cannot write the cluster file: {e}")))?;
        for k in 1..=hosts {
            cluster.spawn_daemon(k);
        }
        for k in 1..=hosts {
            cluster.wait_listening(k);
        }
        Ok(cluster)
    }

    /// Namespaces, veth pairs and the bridge (called with `SETUP` held).
    fn build_network(&mut self, hosts: usize, instance: u32, base: &Path) -> Result<(), Skip> {
        let net = |what: &str, e: String| Skip(format!("cannot set up the test network ({what}): {e}"));
        let sw = self.switch_ns.clone();
        // `ip netns exec` needs to unshare the mount namespace and remount /sys.
        self.run_ip(&["netns", "exec", &sw, "true"]).map_err(|e| net("ip netns exec", e))?;
        self.run_ip(&["-n", &sw, "link", "set", "lo", "up"]).map_err(|e| net("lo", e))?;
        self.run_ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"]).map_err(|e| net("bridge", e))?;
        self.run_ip(&["-n", &sw, "link", "set", "br0", "up"]).map_err(|e| net("bridge", e))?;
        let pid = std::process::id();
        for k in 1..=hosts {
            let ns = format!("rmr{pid}x{instance}h{k}");
            self.run_ip(&["netns", "add", &ns]).map_err(|e| net("namespace", e))?;
            self.created.push(ns.clone());
            let addr = format!("10.77.{}.{k}", self.subnet);
            let port = format!("p{k}");
            // Both ends are created directly in their namespaces: nothing ever appears in
            // the root namespace, and the short names cannot clash with anything.
            self.run_ip(&["-n", &ns, "link", "set", "lo", "up"]).map_err(|e| net("lo", e))?;
            self.run_ip(&[
                "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port, "netns", &sw,
            ])
            .map_err(|e| net("veth", e))?;
            self.run_ip(&["-n", &sw, "link", "set", &port, "master", "br0", "up"])
                .map_err(|e| net("bridge port", e))?;
            self.run_ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", "eth0"])
                .map_err(|e| net("address", e))?;
            self.run_ip(&["-n", &ns, "link", "set", "eth0", "up"]).map_err(|e| net("eth0", e))?;
            let runtime_dir = base.join(format!("h{k}"));
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&runtime_dir)
                .map_err(|e| Skip(format!("cannot create {}: {e}", runtime_dir.display())))?;
            self.hosts.push(Host { ns, addr, runtime_dir, log: base.join(format!("h{k}.log")), child: None });
        }
        Ok(())
    }

    fn write_cluster_file(&self) -> std::io::Result<()> {
        let mut text = format!(
            "# written by remora-testkit\nsecret = \"{}\"\nheartbeat_ms = {HEARTBEAT_MS}\n{}",
            self.secret, self.extra
        );
        for (i, h) in self.hosts.iter().enumerate() {
            text += &format!("\n[[node]]\nid = {}\nhost = \"{}\"\nport = {PORT}\n", 4 * (i + 1), h.addr);
        }
        fs::write(&self.cluster_file, text)
    }

    /// The number of hosts.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    fn host(&self, k: usize) -> &Host {
        assert!(
            k >= 1 && k <= self.hosts.len(),
            "host {k} does not exist (hosts are 1..={})",
            self.hosts.len()
        );
        &self.hosts[k - 1]
    }

    fn host_mut(&mut self, k: usize) -> &mut Host {
        let n = self.hosts.len();
        assert!(k >= 1 && k <= n, "host {k} does not exist (hosts are 1..={n})");
        &mut self.hosts[k - 1]
    }

    /// The node id of host `k` (1-based): `4 * k`.
    ///
    /// # Panics
    /// If host `k` does not exist (as every method taking a host).
    pub fn node(&self, k: usize) -> u32 {
        self.host(k);
        4 * k as u32
    }

    /// The IPv4 address of host `k`'s `eth0` (`10.77.S.k`).
    pub fn addr(&self, k: usize) -> &str {
        &self.host(k).addr
    }

    /// The name of host `k`'s network namespace (for `ip netns exec`).
    pub fn namespace(&self, k: usize) -> &str {
        &self.host(k).ns
    }

    /// The name of the namespace that holds the bridge `br0`.
    pub fn switch_namespace(&self) -> &str {
        &self.switch_ns
    }

    /// Host `k`'s runtime directory (where its node's socket and lock live).
    pub fn runtime_dir(&self, k: usize) -> &Path {
        &self.host(k).runtime_dir
    }

    /// The cluster file every daemon (and client) uses.
    pub fn cluster_file(&self) -> &Path {
        &self.cluster_file
    }

    /// The shared secret of the cluster file (32 hex characters).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The temporary directory holding the cluster file, runtime directories and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The environment a program on host `k` needs: `REMORA_RUNTIME_DIR`, `REMORA_NODE`,
    /// `REMORA_CLUSTER` and `REMORA_NO_SPAWN=1` (the test owns the daemons).
    pub fn env(&self, k: usize) -> Vec<(String, String)> {
        let h = self.host(k);
        vec![
            ("REMORA_RUNTIME_DIR".into(), h.runtime_dir.to_string_lossy().into_owned()),
            ("REMORA_NODE".into(), self.node(k).to_string()),
            ("REMORA_CLUSTER".into(), self.cluster_file.to_string_lossy().into_owned()),
            ("REMORA_NO_SPAWN".into(), "1".into()),
        ]
    }

    /// A command that runs `program` inside host `k`'s namespace with [`NetCluster::env`];
    /// add arguments with `.arg()`. Processes still running there when the cluster is
    /// dropped are killed.
    pub fn command(&self, k: usize, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(&self.ip);
        cmd.arg("netns").arg("exec").arg(&self.host(k).ns).arg(program).envs(self.env(k));
        cmd
    }

    /// The pid of host `k`'s daemon, if the cluster has one running for it.
    pub fn daemon_pid(&self, k: usize) -> Option<u32> {
        self.host(k).child.as_ref().map(Child::id)
    }

    /// SIGKILL host `k`'s daemon and reap it (nothing happens if none runs). Its socket file
    /// stays behind, as after a crash.
    pub fn kill_daemon(&mut self, k: usize) {
        if let Some(mut child) = self.host_mut(k).child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Send SIGTERM to host `k`'s daemon and wait for it to exit.
    ///
    /// # Panics
    /// If no daemon runs for host `k`, or it has not exited 10 s after SIGTERM (it is then
    /// killed).
    pub fn stop_daemon(&mut self, k: usize) -> ExitStatus {
        let mut child = self.host_mut(k).child.take().unwrap_or_else(|| panic!("host {k} runs no daemon"));
        let pid = child.id();
        // std has no way to send SIGTERM; the daemon is our unreaped child, so its pid is ours.
        let sent = Command::new("kill").arg("-TERM").arg(pid.to_string()).stderr(Stdio::null()).status();
        if !sent.as_ref().is_ok_and(|s| s.success()) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cannot send SIGTERM to the daemon of host {k} (pid {pid}) with `kill`: {sent:?}");
        }
        wait_until(&mut child, Instant::now() + STOP_TIMEOUT).unwrap_or_else(|| {
            panic!("the daemon of host {k} ignored SIGTERM for {STOP_TIMEOUT:?}; killed it")
        })
    }

    /// Start host `k`'s daemon again (same node id, runtime directory and cluster file) and
    /// wait until it listens.
    ///
    /// # Panics
    /// If a daemon the cluster started for host `k` still runs, or the new one exits or does
    /// not listen within 20 s.
    pub fn start_daemon(&mut self, k: usize) {
        if let Some(child) = self.host_mut(k).child.as_mut() {
            match child.try_wait() {
                Ok(Some(_)) => {}
                _ => panic!("host {k} already runs a daemon (pid {})", child.id()),
            }
        }
        self.spawn_daemon(k);
        self.wait_listening(k);
    }

    fn spawn_daemon(&mut self, k: usize) {
        let node = self.node(k);
        let (ip, daemon, cluster_file) = (self.ip.clone(), self.daemon.clone(), self.cluster_file.clone());
        let h = self.host_mut(k);
        let mut log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&h.log)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", h.log.display()));
        let _ = writeln!(log, "=== remora-testkit: starting the daemon of host {k} (node {node}) ===");
        let level = std::env::var("REMORA_TESTKIT_LOG").unwrap_or_else(|_| "debug".into());
        let child = Command::new(ip)
            .arg("netns")
            .arg("exec")
            .arg(&h.ns)
            .arg(&daemon)
            .arg("--node")
            .arg(node.to_string())
            .arg("--runtime-dir")
            .arg(&h.runtime_dir)
            .arg("--cluster")
            .arg(cluster_file)
            .env("REMORA_LOG", level)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", daemon.display()));
        h.child = Some(child);
    }

    /// Wait until host `k`'s daemon listens on its socket. `ip netns exec` execs the daemon,
    /// so the child's pid is the daemon's, and `/proc/PID/net/unix` lists the sockets of its
    /// namespace: a listening socket bound to our path is the daemon's, never a stale file.
    fn wait_listening(&mut self, k: usize) {
        let node = self.node(k);
        let h = self.host_mut(k);
        let sock = h.runtime_dir.join(format!("node-{node}.sock"));
        let sock = sock.to_string_lossy().into_owned();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let child = h.child.as_mut().expect("a daemon was just started");
            if let Ok(Some(status)) = child.try_wait() {
                h.child = None;
                let log = read_lossy(&h.log);
                panic!("the daemon of host {k} (node {node}) exited ({status}); its log:\n{log}");
            }
            let table = fs::read_to_string(format!("/proc/{}/net/unix", child.id())).unwrap_or_default();
            if listening(&table, &sock) {
                return;
            }
            if Instant::now() >= deadline {
                let log = read_lossy(&h.log);
                panic!("the daemon of host {k} (node {node}) does not listen on {sock} after {START_TIMEOUT:?}; its log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Take host `k`'s `eth0` down (its peer on the bridge loses carrier): the host is cut
    /// off from every other host until [`NetCluster::link_up`].
    ///
    /// # Panics
    /// If `ip` fails.
    pub fn link_down(&self, k: usize) {
        self.set_link(k, "down");
    }

    /// Bring host `k`'s `eth0` back up (address and route return with it).
    ///
    /// # Panics
    /// If `ip` fails.
    pub fn link_up(&self, k: usize) {
        self.set_link(k, "up");
    }

    fn set_link(&self, k: usize, state: &str) {
        let ns = &self.host(k).ns;
        if let Err(e) = self.run_ip(&["-n", ns, "link", "set", "eth0", state]) {
            panic!("ip link set eth0 {state} in {ns}: {e}");
        }
    }

    /// Whether host `from` reaches host `to` over TCP right now: a connection attempt to a
    /// closed port of `to` is answered (refused) within 2 s. Needs `bash` and `timeout`.
    pub fn can_reach(&self, from: usize, to: usize) -> bool {
        let script = format!("exec 3<>/dev/tcp/{}/9", self.addr(to));
        let mut cmd = Command::new(&self.ip);
        cmd.args(["netns", "exec", &self.host(from).ns, "timeout", "2", "bash", "-c", &script]);
        match cmd.stdin(Stdio::null()).stdout(Stdio::null()).output() {
            Ok(out) => out.status.success() || String::from_utf8_lossy(&out.stderr).contains("refused"),
            Err(_) => false,
        }
    }

    /// Everything host `k`'s daemons have written so far (all starts, in order).
    pub fn daemon_log(&self, k: usize) -> String {
        read_lossy(&self.host(k).log)
    }

    /// Run `ip` with `args`; the error is its stderr.
    fn run_ip(&self, args: &[&str]) -> Result<(), String> {
        run_ip(&self.ip, args)
    }
}

impl Drop for NetCluster {
    fn drop(&mut self) {
        let mut pids = Vec::new();
        for h in &mut self.hosts {
            if let Some(mut child) = h.child.take() {
                pids.push(child.id());
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            for (i, h) in self.hosts.iter().enumerate() {
                let log = read_lossy(&h.log);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!("--- remora-testkit: last lines of the daemon log of host {} ({}):", i + 1, h.ns);
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
        // Hosts first (their veth ends take the bridge ports with them), the switch last.
        for ns in self.created.iter().rev() {
            delete_namespace(&self.ip, ns);
        }
        // The daemons died without closing their fabrics (ofi+shm regions stay otherwise).
        // (Named after the host's address, or after the daemon's pid where the provider
        // chose the name.)
        for h in &self.hosts {
            remove_shm_regions(&h.addr);
        }
        for pid in pids {
            remove_shm_regions(&pid.to_string());
        }
        if std::env::var_os("REMORA_TESTKIT_KEEP").is_some_and(|v| !v.is_empty() && v != "0") {
            self.dir.disable_cleanup(true);
            let _ = fs::write(self.dir.path().join(KEEP_MARK), "REMORA_TESTKIT_KEEP\n");
            eprintln!("remora-testkit: kept {}", self.dir.path().display());
        }
    }
}

#[cfg(test)]
mod tests;
