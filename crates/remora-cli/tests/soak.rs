//! `remora soak` for 60 s (issue 18.1): three nodes over TCP on loopback, four worker
//! processes doing random SISCI and SCIF operations with every byte checked, while the
//! seeded schedule kills workers and daemons and stops daemons past three heartbeats. The
//! run must end with 0 corrupt bytes, 0 hung calls, the daemons back to their baseline and
//! every link event within the API's promise (the command's exit status says so).

use std::process::Command;

#[test]
fn a_60_second_soak_passes() {
    let o = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["soak", "--seconds", "60", "--nodes", "3", "--clients", "4", "--seed", "1"])
        .env("REMORA_DAEMON", remora_testkit::daemon_path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{text}");
    assert!(o.status.success(), "the soak failed:\n{text}\n{err}");
    for want in ["corrupt bytes: 0 ", "hung calls: 0 ", "soak: PASS"] {
        assert!(text.contains(want), "no {want:?} in:\n{text}");
    }
    assert!(!text.contains("NOT back to baseline"), "{text}");
    let faults = text.split("faults injected, by kind:").nth(1).unwrap_or("");
    assert!(faults.contains("daemon"), "the schedule injected daemon faults:\n{text}");
}
