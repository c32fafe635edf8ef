//! `remora bench --json`: every row is written with its figures, target and verdict, and the
//! run ends with the summary of targets.

use std::process::Command;

#[test]
fn bench_rows_carry_target_and_verdict_in_json() {
    let rt = tempfile::Builder::new().prefix("remora-bench-json").tempdir().unwrap();
    let out = rt.path().join("rows.json");
    let o = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["bench", "--json"])
        .arg(&out)
        .args(["connect", "--samples", "20"])
        .env("REMORA_RUNTIME_DIR", rt.path())
        .env("REMORA_DAEMON", remora_testkit::daemon_path())
        .env("REMORA_IDLE_EXIT", "2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("verdict"), "the table has a verdict column: {text}");
    let json = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<&str> = json.lines().filter(|l| l.contains("\"name\"")).collect();
    assert!(!rows.is_empty(), "{json}");
    assert!(json.trim_start().starts_with('[') && json.trim_end().ends_with(']'), "{json}");
    for r in rows {
        assert!(r.contains("\"target\": \"") && r.contains("\"verdict\": "), "{r}");
        assert!(r.contains("\"ratio\": "), "{r}");
    }
    let _ = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["shutdown", "--all"])
        .env("REMORA_RUNTIME_DIR", rt.path())
        .output();
}
