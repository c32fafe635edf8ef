//! The command line's own commands: `remora bench --json` writes every row with its figures,
//! target and verdict (`remora bench hosts` those its measuring child takes on another
//! "host"); `remora status --json` prints every node's status; `remora diag`
//! gives a verdict per check of the machine.

use std::process::Command;

/// `remora bench --json <file> <args>` in a runtime directory of its own (its daemons leave
/// `idle_exit` seconds after their last client): asserts it succeeded, and gives the
/// directory (for the caller's shutdown), the table it printed, and the JSON.
fn bench_json(prefix: &str, args: &[&str], idle_exit: &str) -> (tempfile::TempDir, String, String) {
    let rt = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    let out = rt.path().join("rows.json");
    let o = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["bench", "--json"])
        .arg(&out)
        .args(args)
        .env("REMORA_RUNTIME_DIR", rt.path())
        .env("REMORA_DAEMON", remora_testkit::daemon_path())
        .env("REMORA_IDLE_EXIT", idle_exit)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    let json = std::fs::read_to_string(&out).unwrap();
    (rt, text, json)
}

/// The JSON's row lines.
fn rows(json: &str) -> Vec<&str> {
    json.lines().filter(|l| l.contains("\"name\"")).collect()
}

#[test]
fn bench_rows_carry_target_and_verdict_in_json() {
    let (rt, text, json) = bench_json("remora-bench-json", &["connect", "--samples", "20"], "2");
    assert!(text.contains("verdict"), "the table has a verdict column: {text}");
    let rows = rows(&json);
    assert!(!rows.is_empty(), "{json}");
    assert!(json.trim_start().starts_with('[') && json.trim_end().ends_with(']'), "{json}");
    for r in rows {
        assert!(r.contains("\"target\": \"") && r.contains("\"verdict\": "), "{r}");
        assert!(r.contains("\"ratio\": "), "{r}");
    }
    shutdown_all(rt.path());
}

/// `bench intr` runs its two processes through every kind of batch (the blocked one with its
/// pause, both processes pinned to one core, spinning) and reports each row beside raw
/// futexes, and how many of the blocked waits slept.
#[test]
fn bench_intr_reports_blocked_one_core_and_spinning_rows() {
    let (rt, text, json) =
        bench_json("remora-bench-intr", &["intr", "--batch", "20", "--rounds", "2", "--pause-us", "20"], "2");
    assert!(text.contains("waits that slept: blocked raw"), "{text}");
    let rows = rows(&json);
    for name in [
        "interrupt wake, waiter blocked",
        "interrupt wake, blocked, one core",
        "interrupt wake, waiter spinning",
    ] {
        assert!(rows.iter().any(|r| r.contains(name)), "{name}: {json}");
    }
    assert_eq!(rows.len(), 3, "{json}");
    assert!(rows.iter().all(|r| !r.contains("\"ratio\": null")), "{json}");
    shutdown_all(rt.path());
}

/// `bench hosts` runs its two processes (nodes joined over TCP on loopback), every path's
/// data checks hold (a failed one ends the run with an error), and every row the measuring
/// child takes reaches the parent's table and JSON.
#[test]
fn bench_hosts_rows_reach_the_parent() {
    let (_rt, _, json) = bench_json("remora-bench-hosts", &["hosts", "--loopback", "--reps", "1"], "5");
    let rows = rows(&json);
    for name in [
        "scif_send→recv 8 B",
        "DMA 16 MiB read, vec 16",
        "SCIMemCpy 1 MiB",
        "connect + map",
        "4 DMA queues",
        "4 scif_writeto",
        "interrupt trigger→wake (blocked), one core",
    ] {
        assert!(rows.iter().any(|r| r.contains(name) && r.contains("loopback TCP")), "{name}: {json}");
    }
    // The blocked interrupt on two cores where the test may use two.
    let two = remora_sys::sched::thread_cpus().is_ok_and(|c| c.count() >= 2);
    let two_cores = rows.iter().any(|r| r.contains("interrupt trigger→wake (blocked), two cores"));
    assert_eq!(two_cores, two, "{json}");
    // 23 rows (24 with the two-core one), one beside UCX where ucx_perftest is installed,
    // and three beside iperf3 where iperf3 is: one queue; four queues each writing a cached
    // 128 KiB piece, as iperf3's streams send; and the four queues' 16 MiB, only reported.
    let ucx = rows.iter().any(|r| r.contains("UCX tag_lat"));
    let iperf = rows.iter().filter(|r| r.contains("vs iperf3")).count();
    assert!(iperf == 0 || iperf == 3, "{json}");
    if iperf == 3 {
        assert!(rows.iter().any(|r| r.contains("128 KiB cached each, vs iperf3 -P 4")), "{json}");
        let whole = rows.iter().find(|r| r.contains("4 DMA queues × 16 MiB vs iperf3 -P 4"));
        assert!(whole.is_some_and(|r| r.contains("reported (footprint differs")), "{json}");
    }
    assert_eq!(rows.len(), 23 + usize::from(two) + usize::from(ucx) + iperf, "{json}");
    assert!(rows.iter().all(|r| !r.contains("\"ratio\": null")), "{json}");
}

/// `bench vipl --across-hosts` ends with its two rows of a starved receiver (one receive
/// kept posted, work after each message), each with its figures beside raw TCP and a
/// verdict (no figure is judged here: a loaded machine's are its own).
#[test]
fn bench_vipl_across_hosts_reports_the_starved_receiver_rows() {
    let (rt, text, json) = bench_json(
        "remora-bench-vipl-far",
        &["vipl", "--across-hosts", "--batch", "100", "--rounds", "1"],
        "5",
    );
    let rows = rows(&json);
    for work in [200, 1500] {
        let name = format!("vipl 8 B, 1 posted, {work} µs work");
        let row = rows.iter().find(|r| r.contains(&name)).unwrap_or_else(|| panic!("{name}: {json}"));
        assert!(row.contains("msg/s") && row.contains("raw TCP, same work"), "{row}");
        assert!(row.contains("\"verdict\": \"met\"") || row.contains("\"verdict\": \"missed\""), "{row}");
        let line = text.lines().find(|l| l.starts_with(&name)).unwrap_or_else(|| panic!("{name}: {text}"));
        assert!(line.contains(" met ") || line.contains(" MISSED "), "{line}");
    }
    shutdown_all(rt.path());
}

#[test]
fn status_json_lists_every_node() {
    let rt = tempfile::Builder::new().prefix("remora-status-json").tempdir().unwrap();
    let remora = |args: &[&str], node: u32| {
        Command::new(env!("CARGO_BIN_EXE_remora"))
            .args(args)
            .env("REMORA_RUNTIME_DIR", rt.path())
            .env("REMORA_DAEMON", remora_testkit::daemon_path())
            .env("REMORA_IDLE_EXIT", "5")
            .env("REMORA_NODE", node.to_string())
            .output()
            .unwrap()
    };
    // A probe starts each node's daemon.
    assert!(remora(&["probe", "4"], 4).status.success());
    assert!(remora(&["probe", "8"], 8).status.success());
    let o = remora(&["status", "--json"], 4);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    let t = text.trim();
    assert!(t.starts_with('[') && t.ends_with(']'), "{t}");
    assert!(t.contains("\"node\": 4") && t.contains("\"node\": 8"), "{t}");
    assert!(t.contains("\"segments\"") && t.contains("\"sessions\""), "{t}");
    let _ = remora(&["shutdown", "--all"], 4);
}

#[test]
fn diag_gives_a_verdict_per_check() {
    let rt = tempfile::Builder::new().prefix("remora-diag").tempdir().unwrap();
    let run = |vars: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_remora"))
            .arg("diag")
            .env("REMORA_RUNTIME_DIR", rt.path())
            .env("REMORA_DAEMON", remora_testkit::daemon_path())
            .envs(vars.iter().copied())
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    for check in [
        "configuration",
        "runtime directory",
        "daemon",
        "memfd",
        "userfaultfd",
        "registered memory",
        "memlock",
        "cluster",
    ] {
        assert!(
            text.lines().any(|l| l.contains(check) && (l.starts_with("ok") || l.starts_with("WARN"))),
            "{check}: {text}"
        );
    }
    assert!(text.contains("verdict: this machine can run Remora nodes"), "{text}");
    // A bad value fails the configuration check, naming the variable.
    let o = run(&[("REMORA_NODE", "abc")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(text.lines().any(|l| l.starts_with("FAIL") && l.contains("REMORA_NODE")), "{text}");
    // A daemon binary that is not there fails the daemon check.
    let o = run(&[("REMORA_DAEMON", "/nonexistent/remorad")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(text.lines().any(|l| l.starts_with("FAIL") && l.contains("daemon")), "{text}");
}

#[test]
fn top_once_shows_nodes_and_their_segments() {
    let rt = tempfile::Builder::new().prefix("remora-top").tempdir().unwrap();
    let cfg = remora_client::Config {
        node: 4,
        runtime_dir: rt.path().to_path_buf(),
        daemon: Some(remora_testkit::daemon_path()),
        spawn: true,
        idle_exit: std::time::Duration::from_secs(5),
        cluster: None,
    };
    let s = remora_client::Session::open(&cfg).unwrap();
    let req =
        remora_proto::Request::CreateSegment { id: Some(0x77), size: 8192, private: false, empty: false };
    s.request(req, &[]).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["top", "--once"])
        .env("REMORA_RUNTIME_DIR", rt.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("remora top") && text.contains("segments") && text.contains("links to other hosts"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("0x77") && l.contains("8192") && l.contains("created")),
        "{text}"
    );
    drop(s);
    shutdown_all(rt.path());
}

/// Stop every daemon a test started under runtime directory `rt` (`remora shutdown --all`).
fn shutdown_all(rt: &std::path::Path) {
    let _ = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["shutdown", "--all"])
        .env("REMORA_RUNTIME_DIR", rt)
        .output();
}
