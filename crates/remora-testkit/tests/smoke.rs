//! The test cluster itself: namespaces, bridge, daemons, restarts, links and clean-up.

use remora_testkit::{NetCluster, Skip};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn ip() -> PathBuf {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .map(PathBuf::from)
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("ip"))
}

fn namespaces() -> Vec<String> {
    let out = Command::new(ip()).args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

fn have(program: &str) -> bool {
    Command::new(program).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// `ping -c1 -W1` from host `from` to host `to`.
fn ping(c: &NetCluster, from: usize, to: usize) -> bool {
    Command::new(ip())
        .args(["netns", "exec", c.namespace(from), "ping", "-c1", "-W1", c.addr(to)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn socket(c: &NetCluster, k: usize) -> PathBuf {
    c.runtime_dir(k).join(format!("node-{}.sock", c.node(k)))
}

fn start(hosts: usize) -> Result<NetCluster, Skip> {
    // target/debug/deps/smoke-… → target/debug/remorad
    let exe = std::env::current_exe().expect("current_exe");
    let daemon = exe.parent().and_then(Path::parent).expect("target directory").join("remorad");
    if !daemon.is_file() {
        return Err(Skip(format!("no remorad at {} (cargo build -p remora-node)", daemon.display())));
    }
    NetCluster::start(hosts, &daemon)
}

#[test]
fn two_hosts_come_up_restart_lose_their_link_and_vanish() {
    let mut c = match start(2) {
        Ok(c) => c,
        Err(skip) => {
            eprintln!("{skip}");
            return;
        }
    };
    assert_eq!(c.hosts(), 2);
    assert_eq!((c.node(1), c.node(2)), (4, 8));
    assert!(socket(&c, 1).exists() && socket(&c, 2).exists());
    assert_eq!(c.secret().len(), 32);
    let file = std::fs::read_to_string(c.cluster_file()).unwrap();
    assert!(file.contains(c.secret()) && file.contains(&format!("host = \"{}\"", c.addr(2))));
    assert!(file.contains("id = 8") && file.contains("port = 7400") && file.contains("heartbeat_ms = 200"));
    let env = c.env(2);
    assert!(env.contains(&("REMORA_NODE".into(), "8".into())));
    assert!(env.contains(&("REMORA_NO_SPAWN".into(), "1".into())));

    // A program runs inside the host's namespace, with the host's environment.
    let script = "echo $REMORA_NODE; \"$0\" -4 -o addr show dev eth0";
    let out = c.command(2, "sh").arg("-c").arg(script).arg(ip()).output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.starts_with("8\n") && out.contains(&format!("{}/24", c.addr(2))), "{out}");

    let pinging = have("ping");
    if pinging {
        assert!(ping(&c, 1, 2), "host 1 cannot ping host 2");
    } else {
        eprintln!("ping is not installed: checking reachability over TCP only");
    }
    assert!(c.can_reach(1, 2) && c.can_reach(2, 1));

    // A crashed daemon leaves its socket file behind; a new one takes over.
    let old = c.daemon_pid(2).unwrap();
    c.kill_daemon(2);
    assert!(c.daemon_pid(2).is_none());
    assert!(
        !Path::new(&format!("/proc/{old}")).exists() || {
            let stat = std::fs::read_to_string(format!("/proc/{old}/stat")).unwrap_or_default();
            stat.contains(") Z ")
        }
    );
    c.start_daemon(2);
    assert_ne!(c.daemon_pid(2), Some(old));
    assert!(socket(&c, 2).exists());
    assert_eq!(c.daemon_log(2).matches("starting the daemon of host 2").count(), 2);

    // A clean stop: the daemon removes its socket.
    let status = c.stop_daemon(1);
    assert!(status.success(), "remorad exited with {status} after SIGTERM");
    assert!(!socket(&c, 1).exists());
    c.start_daemon(1);

    c.link_down(2);
    assert!(!c.can_reach(1, 2), "host 2 is still reachable with its link down");
    if pinging {
        assert!(!ping(&c, 1, 2));
    }
    c.link_up(2);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !c.can_reach(1, 2) {
        assert!(std::time::Instant::now() < deadline, "host 2 is unreachable after link_up");
    }
    if pinging {
        assert!(ping(&c, 1, 2));
    }

    let names = [c.namespace(1), c.namespace(2), c.switch_namespace()].map(String::from);
    let pids = [c.daemon_pid(1).unwrap(), c.daemon_pid(2).unwrap()];
    drop(c);
    let left = namespaces();
    for n in &names {
        assert!(!left.contains(n), "namespace {n} left behind");
    }
    for pid in pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "daemon {pid} left running");
    }
}

#[test]
fn clean_up_also_happens_when_a_test_panics() {
    let names = std::sync::Mutex::new(Vec::new());
    let sleeper = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let c = match start(1) {
            Ok(c) => c,
            Err(skip) => {
                eprintln!("{skip}");
                return false;
            }
        };
        names.lock().unwrap().extend([c.namespace(1).to_string(), c.switch_namespace().to_string()]);
        *sleeper.lock().unwrap() = Some(c.command(1, "sleep").arg("600").spawn().unwrap());
        panic!("on purpose");
    });
    if matches!(result, Ok(false)) {
        return;
    }
    assert!(result.is_err());
    // The program left running inside the host was killed with the namespace.
    let mut sleeper = sleeper.lock().unwrap_or_else(|p| p.into_inner()).take().expect("sleep started");
    let status = sleeper.wait().unwrap();
    assert!(!status.success(), "sleep 600 was not killed: {status}");
    let left = namespaces();
    for n in names.lock().unwrap().iter() {
        assert!(!left.contains(n), "namespace {n} left behind");
    }
}
