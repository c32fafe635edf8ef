//! `remorad` under a file size limit (`ulimit -f`), as a daemon the library starts
//! inherits it from the program: writing past the limit raises `SIGXFSZ`, which would end
//! the daemon.

use std::process::Command;
use std::time::Duration;

/// A daemon whose log (of earlier runs) is already past the file size limit starts, serves
/// and stays up: each log line, which would take the file further past the limit, is
/// dropped; the first one raised `SIGXFSZ` and ended the daemon at its start.
#[test]
fn a_daemon_whose_log_is_past_the_file_size_limit_starts_and_serves() {
    let dir = tempfile::Builder::new().prefix("remora-fsize").tempdir().unwrap();
    let node = 46u32;
    let log = dir.path().join(format!("node-{node}.log"));
    std::fs::write(&log, vec![b'.'; 4 << 20]).unwrap();
    // `ulimit -f` counts blocks of 512 bytes (dash) or 1024 (bash): 1 or 2 MiB, under the log.
    let out = Command::new("sh")
        .args(["-c", "ulimit -f 2048 && exec \"$0\" --detach --node \"$1\" --runtime-dir \"$2\""])
        .arg(env!("CARGO_BIN_EXE_remorad"))
        .arg(node.to_string())
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = remora_client::Config {
        node,
        runtime_dir: dir.path().to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: None,
    };
    for _ in 0..3 {
        let s = remora_client::Session::open_control(&cfg).unwrap();
        let st = s.request(remora_proto::Request::Status, &[]).unwrap();
        assert!(matches!(st.0, remora_proto::Reply::Status(_)), "{st:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 4 << 20, "nothing was written past the limit");
    let s = remora_client::Session::open_control(&cfg).unwrap();
    let _ = s.request(remora_proto::Request::Shutdown, &[]);
}
