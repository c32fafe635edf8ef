//! The syscall and mapping layer of Remora.
//!
//! Every `unsafe` block of the project that touches the kernel lives here (the C-ABI crates
//! hold the rest). Upper layers get safe types: [`Memfd`] for sealed shared-memory files,
//! [`Mapping`] for `mmap`ed views of them, and [`seqpacket`] for the control socket with
//! file-descriptor passing (SCM_RIGHTS).
//!
//! ```
//! use remora_sys::{AsFd, Memfd, Mapping, MapOptions};
//! let fd = Memfd::create("example", 8192).unwrap();
//! let map = Mapping::new(fd.as_fd(), 0, 8192, MapOptions::default()).unwrap();
//! map.write(100, b"hello").unwrap();
//! let mut back = [0u8; 5];
//! map.read(100, &mut back).unwrap();
//! assert_eq!(&back, b"hello");
//! ```

#[cfg(feature = "tokio")]
pub mod async_conn;
pub mod bell;
pub mod cancel;
pub mod dma;
pub mod flow;
pub mod intr;
pub mod lock;
pub mod mapping;
pub mod memfd;
pub mod msgring;
pub mod nofollow;
pub mod own_copy;
pub mod poller;
pub mod probe;
pub mod sched;
pub mod seqpacket;
pub mod sync;
pub mod uffd;
pub mod user_memory;

pub use mapping::{write_all_vectored, MapOptions, Mapping};
pub use memfd::Memfd;
pub use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The calling process's limit of locked memory in bytes (`RLIMIT_MEMLOCK`; `None`:
/// unlimited).
pub fn memlock_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Memlock).current
}

/// `d` as a `timespec` for `poll`, `epoll_wait` and `futex` (seconds past `i64::MAX`
/// saturate: a wait that long is a wait for ever).
pub(crate) fn timespec(d: std::time::Duration) -> rustix::time::Timespec {
    rustix::time::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: d.subsec_nanos().into(),
    }
}

/// The size of a page on this machine.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// The size of a CPU cache line, read from sysfs (64 when sysfs does not say).
pub fn cache_line_size() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(64)
}

/// The path of the shared object or executable whose mapping contains `addr`, read from
/// `/proc/self/maps`. Used to find files installed beside the library (e.g. `remorad`).
pub fn object_containing(addr: usize) -> Option<std::path::PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let range = parts.next()?;
        let (lo, hi) = range.split_once('-')?;
        let lo = usize::from_str_radix(lo, 16).ok()?;
        let hi = usize::from_str_radix(hi, 16).ok()?;
        if addr >= lo && addr < hi {
            let path = parts.nth(4)?;
            if path.starts_with('/') {
                return Some(path.into());
            }
            return None;
        }
    }
    None
}

/// Round `n` up to a multiple of the page size.
pub fn page_round_up(n: usize) -> usize {
    let p = page_size();
    n.div_ceil(p) * p
}

/// Whether this process runs with root's effective user id.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The inode number of an open file (0 when `fstat` fails).
pub fn inode_of(fd: BorrowedFd<'_>) -> u64 {
    rustix::fs::fstat(fd).map(|s| s.st_ino).unwrap_or(0)
}

/// An open file's device and inode number (`(0, 0)` when `fstat` fails): tells two
/// descriptors of one file apart from descriptors of different ones, which may have the
/// same inode number on different devices (a hugetlbfs memfd and a tmpfs one, say).
pub fn file_id_of(fd: BorrowedFd<'_>) -> (u64, u64) {
    rustix::fs::fstat(fd).map(|s| (s.st_dev, s.st_ino)).unwrap_or((0, 0))
}

/// Try to take an advisory `flock` on `file` without waiting: shared when `shared`, else
/// exclusive. `Ok(false)` when another open file holds a lock that conflicts (an exclusive
/// one, or any one for an exclusive request); the lock lasts until the file is closed, so it
/// also ends with the process. Used for reservations several processes of a host share.
///
/// # Errors
/// The I/O error of `flock` other than "would block".
pub fn try_lock_file(file: &std::fs::File, shared: bool) -> std::io::Result<bool> {
    use rustix::fs::FlockOperation;
    let op =
        if shared { FlockOperation::NonBlockingLockShared } else { FlockOperation::NonBlockingLockExclusive };
    match rustix::fs::flock(file, op) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A signal a supervisor sends to a process it runs (the soak's faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessSignal {
    /// `SIGKILL`.
    Kill,
    /// `SIGSTOP`.
    Stop,
    /// `SIGCONT`.
    Cont,
}

/// Send `sig` to process `pid` (`kill(2)`).
///
/// # Errors
/// `EINVAL` for pid 0; the errno of `kill` (`ESRCH` when the process is gone).
pub fn send_signal(pid: u32, sig: ProcessSignal) -> std::io::Result<()> {
    use rustix::process::{kill_process, Pid, Signal};
    let p = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()))?;
    let s = match sig {
        ProcessSignal::Kill => Signal::KILL,
        ProcessSignal::Stop => Signal::STOP,
        ProcessSignal::Cont => Signal::CONT,
    };
    kill_process(p, s).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// A wait too long for `i64` seconds saturates instead of turning negative (a wait of
    /// no time at all, or an error, where the caller meant for ever).
    #[test]
    fn a_timespec_saturates() {
        let t = super::timespec(Duration::MAX);
        assert_eq!((t.tv_sec, t.tv_nsec), (i64::MAX, 999_999_999));
        let t = super::timespec(Duration::new(3, 25));
        assert_eq!((t.tv_sec, t.tv_nsec), (3, 25));
    }
}
