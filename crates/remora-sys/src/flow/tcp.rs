//! TCP settings of the links' sockets: the congestion control, and the kernel a link's two
//! ends compare to know they run on one machine.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

/// Set the TCP congestion control of `fd` to `name` (`TCP_CONGESTION`; it applies from the
/// next segment sent, on a connected socket too).
///
/// # Errors
/// `ENOENT` when the kernel has no such algorithm, `EPERM` when this process may not
/// choose it (unprivileged, and it is not in `net.ipv4.tcp_allowed_congestion_control`),
/// or `fd` is not a TCP socket.
pub fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    rustix::net::sockopt::set_tcp_congestion(fd, name).map_err(io::Error::from)
}

/// The TCP congestion control of `fd` (`TCP_CONGESTION`).
///
/// # Errors
/// `fd` is not a TCP socket.
pub fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    rustix::net::sockopt::tcp_congestion(fd).map_err(io::Error::from)
}

/// A copy of this process's descriptor number `fd` (`pidfd_getfd` on this very process):
/// a look at a connection the caller holds no handle to (a test's view of every socket of
/// its process), that stays valid whatever closes the number meanwhile.
///
/// # Errors
/// `fd` is not open (`EBADF`), or the kernel lacks `pidfd_getfd` (before 5.6).
pub fn copy_own(fd: i32) -> io::Result<OwnedFd> {
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};
    let me = pidfd_open(getpid(), PidfdFlags::empty())?;
    Ok(pidfd_getfd(&me, fd, PidfdGetfdFlags::empty())?)
}

/// An id of the running kernel: the same for every process of this boot of this machine,
/// in whatever network namespace, and different on another machine or after a reboot (the
/// kernel's random boot id, its two halves folded into one word). `0` when the kernel does
/// not say.
pub fn kernel_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|t| fold_uuid(&t)).unwrap_or(0)
    })
}

/// The 128 bits of a UUID's hex digits, its halves folded together; `0` for anything that
/// is not 32 hex digits (dashes and surrounding space aside).
fn fold_uuid(text: &str) -> u64 {
    let hex: String = text.trim().chars().filter(|&c| c != '-').collect();
    match u128::from_str_radix(&hex, 16) {
        Ok(v) if hex.len() == 32 => ((v >> 64) as u64) ^ (v as u64),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn the_kernel_id_folds_the_boot_id_and_is_stable() {
        assert_eq!(fold_uuid("00000000-0000-0001-0000-000000000003\n"), 2);
        assert_eq!(fold_uuid("not a uuid"), 0);
        assert_eq!(fold_uuid("0123"), 0);
        assert_ne!(kernel_id(), 0, "Linux says its boot id");
        assert_eq!(kernel_id(), kernel_id());
    }

    /// The congestion control set on a socket is the one it reports; a name the kernel
    /// does not know is refused.
    #[test]
    fn a_socket_takes_the_congestion_control_it_is_given() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_congestion(s.as_fd(), "reno").unwrap();
        assert_eq!(congestion(s.as_fd()).unwrap(), "reno");
        assert!(set_congestion(s.as_fd(), "no_such_cc").is_err());
    }
}
