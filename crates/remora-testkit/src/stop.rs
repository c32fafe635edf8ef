//! Daemons held up on purpose: stopped with `SIGSTOP` and resumed, also when the test
//! fails, so that work waiting behind them fails the test's bound instead of hanging it.

use crate::Harness;
use std::time::Duration;

/// The pid of node `node`'s daemon in harness `h` (its status answer).
///
/// # Panics
/// If the daemon does not answer with its status.
pub fn daemon_pid(h: &Harness, node: u32) -> u32 {
    let s = remora_client::Session::open_control(&h.config(node)).expect("a control session");
    match s.request(remora_proto::Request::Status, &[]).expect("a status answer").0 {
        remora_proto::Reply::Status(st) => st.pid,
        other => panic!("status asked, {other:?} answered"),
    }
}

/// Send `sig` (`STOP`, `CONT`, `KILL`) to process `pid`.
///
/// # Panics
/// If `kill` fails.
pub fn signal(pid: u32, sig: &str) {
    let done = std::process::Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status();
    assert!(done.as_ref().is_ok_and(|s| s.success()), "kill -{sig} {pid}: {done:?}");
}

/// A process stopped (`SIGSTOP`) until this drops, also when the test fails.
pub struct Stopped(pub u32);

impl Stopped {
    /// Stop process `pid`.
    pub fn new(pid: u32) -> Stopped {
        signal(pid, "STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

/// A process stopped until [`Watched::resume`], or until a watchdog resumes it after
/// `limit` (at once when the test fails and this drops).
pub struct Watched(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<bool>);

impl Watched {
    /// Stop process `pid` for `limit` at most.
    pub fn stop(pid: u32, limit: Duration) -> Watched {
        let (stopped, (tx, rx)) = (Stopped::new(pid), std::sync::mpsc::channel());
        Watched(
            tx,
            std::thread::spawn(move || {
                let late = rx.recv_timeout(limit).is_err();
                drop(stopped);
                late
            }),
        )
    }

    /// Resume the process; whether the watchdog had done it already (`limit` passed).
    pub fn resume(self) -> bool {
        let _ = self.0.send(());
        self.1.join().unwrap_or(true)
    }
}
