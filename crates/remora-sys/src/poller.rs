//! A small epoll wrapper for the client runtime's one event thread.

use rustix::event::epoll;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// An epoll instance (close-on-exec), level-triggered for readability.
#[derive(Debug)]
pub struct Poller {
    ep: OwnedFd,
}

impl Poller {
    /// A new poller.
    ///
    /// # Errors
    /// The errno of `epoll_create1`.
    pub fn new() -> io::Result<Poller> {
        Ok(Poller { ep: epoll::create(epoll::CreateFlags::CLOEXEC)? })
    }

    /// Watch `fd` for readability (and hang-up), reporting `token`.
    ///
    /// # Errors
    /// The errno of `epoll_ctl`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        Ok(epoll::add(
            &self.ep,
            fd,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
        )?)
    }

    /// Stop watching `fd`.
    ///
    /// # Errors
    /// The errno of `epoll_ctl`.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(epoll::delete(&self.ep, fd)?)
    }

    /// Wait up to `timeout` (`None`: forever) and return the tokens of ready descriptors.
    ///
    /// # Errors
    /// The errno of `epoll_wait` (`EINTR` is reported as no events).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<Vec<u64>> {
        let mut events = Vec::with_capacity(32);
        let ts = timeout.map(crate::timespec);
        match epoll::wait(&self.ep, rustix::buffer::spare_capacity(&mut events), ts.as_ref()) {
            Ok(_) => Ok(events.iter().map(|e| e.data.u64()).collect()),
            Err(rustix::io::Errno::INTR) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for Poller {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.ep.as_fd()
    }
}

/// Wait until one of `fds` is readable or `timeout` passes (`None`: forever), with
/// nanosecond resolution (`ppoll`). Interruptions count as a wake-up.
///
/// # Errors
/// The errno of `ppoll` other than `EINTR`.
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut p: Vec<PollFd<'_>> = fds.iter().map(|f| PollFd::new(f, PollFlags::IN)).collect();
    let ts = timeout.map(crate::timespec);
    match poll(&mut p, ts.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Like [`wait_readable`], and says which: bit `i` of the answer is set when `fds[i]` is
/// readable (or hung up). At most 64 descriptors.
///
/// # Errors
/// The errno of `ppoll` (an interrupted wait answers 0).
pub fn wait_ready(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<u64> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut p: Vec<PollFd<'_>> = fds.iter().take(64).map(|f| PollFd::new(f, PollFlags::IN)).collect();
    let ts = timeout.map(crate::timespec);
    match poll(&mut p, ts.as_ref()) {
        Ok(_) => {
            Ok(p.iter().enumerate().filter(|(_, f)| !f.revents().is_empty()).fold(0, |m, (i, _)| m | 1 << i))
        }
        Err(rustix::io::Errno::INTR) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::EventFd;

    #[test]
    fn reports_ready_tokens() {
        let p = Poller::new().unwrap();
        let e = EventFd::new().unwrap();
        p.add(e.as_fd(), 7).unwrap();
        assert!(p.wait(Some(Duration::from_millis(1))).unwrap().is_empty());
        e.signal();
        assert_eq!(p.wait(Some(Duration::from_millis(100))).unwrap(), vec![7]);
        p.delete(e.as_fd()).unwrap();
    }
}
