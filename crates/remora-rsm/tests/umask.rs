//! Creating an export reads the process's umask without changing it (the umask is the
//! whole process's: another thread creating a file meanwhile would get the wrong mode).
//! The test runs itself again under `strace` and counts `umask` calls.

use remora_rsm::*;
use remora_testkit::Harness;
use std::process::Command;

const CHILD: &str = "REMORA_TEST_UMASK_CHILD";

use remora_testkit::data::leaked_pages as pages;

/// What runs under `strace`: exports created, published and destroyed.
fn creates() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    for _ in 0..3 {
        let e = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
        e.publish(0, None).unwrap();
        e.destroy().unwrap();
    }
    println!("creates done");
}

#[test]
fn export_create_never_changes_the_umask() {
    if std::env::var_os(CHILD).is_some() {
        return creates();
    }
    if !std::fs::read_to_string("/proc/self/status").is_ok_and(|s| s.contains("\nUmask:")) {
        return eprintln!("skipping: this kernel's /proc/self/status has no Umask: line");
    }
    if Command::new("strace").arg("-V").output().is_err() {
        return eprintln!("skipping the umask test: it needs strace");
    }
    let dir = std::env::temp_dir().join(format!("remora-umask-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("trace");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=umask", "-o"])
        .arg(&log)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "export_create_never_changes_the_umask", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("creates done"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // The daemon the harness starts is traced too (-f); it makes no umask call either.
    let calls: Vec<&str> = trace.lines().filter(|l| l.contains("umask(")).collect();
    assert!(calls.is_empty(), "export create changed the umask: {calls:?}");
}
