//! Where a waiting thread sleeps, as `/proc` shows it: for tests that must know a waiter
//! is asleep (not about to start waiting) before they act, and in which call.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The system call numbers of `futex`, `poll` and `ppoll` (what `/proc/<tid>/syscall`
/// shows a thread asleep in): a wait sleeps on the page's futex, or on the bell in `poll`
/// (`ppoll` for the last part of a slice under a millisecond, and where there is no
/// `poll`: aarch64).
#[cfg(target_arch = "x86_64")]
pub const SLEEPS: Option<(u64, u64, u64)> = Some((202, 7, 271));
#[cfg(target_arch = "aarch64")]
pub const SLEEPS: Option<(u64, u64, u64)> = Some((98, 73, 73));
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const SLEEPS: Option<(u64, u64, u64)> = None;
/// `futex`'s number, where known.
pub const SYS_FUTEX: Option<u64> = match SLEEPS {
    Some((futex, _, _)) => Some(futex),
    None => None,
};
/// `poll`'s number (`ppoll`'s counts as it), where known.
pub const SYS_POLL: Option<u64> = match SLEEPS {
    Some((_, poll, _)) => Some(poll),
    None => None,
};

/// The call, `futex` or `poll` (`ppoll` counts as `poll`), the thread sleeps in once it
/// sleeps there (seen in three samples in a row: not a lock's futex on the way, nor
/// another call such as the `recvmsg` of a flow's refresh). `None`, said on stderr: not
/// known here (another architecture, or `/proc` not readable); then it waits 100 ms instead.
///
/// # Panics
/// When the thread did not sleep in either within 500 samples 5 ms apart (2.5 s at least).
pub fn asleep_in(task: &Path) -> Option<u64> {
    let unknown = |why: &str| {
        eprintln!("where the waiter sleeps is not checked: {why}");
        std::thread::sleep(Duration::from_millis(100));
        None
    };
    let Some((futex, poll, ppoll)) = SLEEPS else { return unknown("its system calls' numbers") };
    let (mut last, mut seen) = (None, 0);
    for _ in 0..500 {
        let text = match std::fs::read_to_string(task.join("syscall")) {
            Ok(text) => text,
            Err(e) => return unknown(&format!("{}: {e}", task.display())),
        };
        // "running", "-1 …" (blocked outside a call), or the call's number and arguments.
        let nr = text.split_whitespace().next().and_then(|n| n.parse::<u64>().ok());
        let nr = nr.map(|n| if n == ppoll { poll } else { n }).filter(|&n| n == futex || n == poll);
        seen = if nr.is_some() && nr == last { seen + 1 } else { 1 };
        last = nr;
        if let (Some(nr), 3..) = (nr, seen) {
            return Some(nr);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the waiter did not fall asleep in futex or poll in 500 samples 5 ms apart (last: {last:?})");
}

/// The calling thread's `/proc` directory (its `task` for [`asleep_in`]).
pub fn this_task() -> PathBuf {
    let me = std::fs::read_link("/proc/thread-self").unwrap_or_default();
    Path::new("/proc").join(me)
}
