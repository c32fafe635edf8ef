//! A child process held to a deadline: waited for, or killed and reaped when it outruns it.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// How often [`wait_until`] looks whether the child has exited.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// Wait until `child` exits or `deadline` passes: its exit status, or `None` when it outran
/// the deadline (or could not be waited for); it is then killed and reaped, so it never
/// lingers (a deadline already past kills a child still running at once).
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(LOOK_EVERY),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wait_until;
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn a_child_that_ends_in_time_gives_its_status() {
        let mut child = Command::new("sh").args(["-c", "exit 3"]).spawn().expect("sh");
        let status = wait_until(&mut child, Instant::now() + Duration::from_secs(20));
        assert_eq!(status.and_then(|s| s.code()), Some(3));
    }

    #[test]
    fn a_child_past_its_deadline_is_killed_and_reaped() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
        let t = Instant::now();
        assert_eq!(wait_until(&mut child, Instant::now() + Duration::from_millis(100)), None);
        assert!(t.elapsed() < Duration::from_secs(20), "the child was not killed");
        // Reaped: there is nothing left to wait for, and it did not exit by itself.
        assert!(child.try_wait().expect("reaped").is_some_and(|s| s.code().is_none()));
    }
}
