//! Sealed memfds: the memory of every Remora segment.

use rustix::fs::{MemfdFlags, SealFlags};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// An anonymous shared-memory file (`memfd_create`) whose size is sealed.
///
/// The daemon owns one per segment and hands duplicates to processes over SCM_RIGHTS.
#[derive(Debug)]
pub struct Memfd {
    fd: OwnedFd,
    size: u64,
}

impl Memfd {
    /// Create a memfd of `size` bytes (zero-filled), close-on-exec, with its size sealed
    /// (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`) so no holder can truncate it under
    /// another's mapping.
    ///
    /// A size beyond the process's soft file size limit (`ulimit -f`, [`file_size_limit`])
    /// is refused with `EFBIG` before the file is sized: the kernel would raise `SIGXFSZ`
    /// for it, whose default action ends the program (and the signal's disposition is the
    /// program's, not ours to change).
    ///
    /// # Errors
    /// `EFBIG` for a size beyond the file size limit; the errno of `memfd_create`,
    /// `ftruncate` or `fcntl(F_ADD_SEALS)`.
    pub fn create(name: &str, size: u64) -> io::Result<Memfd> {
        check_file_size(size)?;
        let fd = rustix::fs::memfd_create(
            format!("remora:{name}"),
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&fd, size)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        Ok(Memfd { fd, size })
    }

    /// Adopt a memfd received from another process, reading its size with `fstat`.
    ///
    /// # Errors
    /// The errno of `fstat`.
    pub fn from_fd(fd: OwnedFd) -> io::Result<Memfd> {
        let st = rustix::fs::fstat(&fd)?;
        Ok(Memfd { fd, size: st.st_size as u64 })
    }

    /// Whether the size is sealed against shrinking (so a mapping of it can never fault
    /// with SIGBUS because another holder truncated it).
    pub fn is_size_sealed(&self) -> bool {
        rustix::fs::fcntl_get_seals(&self.fd).is_ok_and(|s| s.contains(SealFlags::SHRINK))
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Duplicate the descriptor (close-on-exec).
    ///
    /// # Errors
    /// The errno of `fcntl(F_DUPFD_CLOEXEC)`.
    pub fn try_clone(&self) -> io::Result<Memfd> {
        Ok(Memfd { fd: rustix::io::fcntl_dupfd_cloexec(&self.fd, 3)?, size: self.size })
    }

    /// A new descriptor of the same memory opened read-only (through `/proc/self/fd`), to
    /// hand to a holder that may only read: its `mmap` with `PROT_WRITE` and `MAP_SHARED`
    /// fails with `EACCES`, so the kernel enforces the read-only grant.
    ///
    /// # Errors
    /// The errno of `open`.
    pub fn reopen_readonly(&self) -> io::Result<Memfd> {
        use std::os::fd::AsRawFd;
        let path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        let fd = rustix::fs::open(
            path,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        Ok(Memfd { fd, size: self.size })
    }

    /// Make every byte read zero again, keeping the size: the pages are given back
    /// (`fallocate(PUNCH_HOLE | KEEP_SIZE)`), and every mapping of the file sees zeros. The
    /// fuzz targets give one memfd back to each input as it was made, instead of making
    /// and mapping a new one.
    ///
    /// # Errors
    /// The errno of `fallocate`.
    pub fn zero(&self) -> io::Result<()> {
        let mode = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        Ok(rustix::fs::fallocate(&self.fd, mode, 0, self.size)?)
    }

    /// Give up the wrapper, keeping the descriptor.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

/// The soft file size limit of the process (`RLIMIT_FSIZE`, `ulimit -f`) in bytes, `None`
/// when unlimited. Making a file longer than this raises `SIGXFSZ`.
pub fn file_size_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Fsize).current
}

/// `Ok` when a file may be made `size` bytes long under [`file_size_limit`] (the kernel
/// signals a size above the limit; the limit itself is allowed).
///
/// The limit is read at each call: a thread that lowers it between this check and the
/// sizing it guards can still see `SIGXFSZ`.
///
/// # Errors
/// `EFBIG` when `size` is above the limit.
pub fn check_file_size(size: u64) -> io::Result<()> {
    match file_size_limit() {
        Some(limit) if size > limit => Err(rustix::io::Errno::FBIG.into()),
        _ => Ok(()),
    }
}

impl AsFd for Memfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_size_cannot_change() {
        let m = Memfd::create("t", 4096).unwrap();
        assert_eq!(m.size(), 4096);
        assert!(rustix::fs::ftruncate(&m, 8192).is_err());
        assert!(rustix::fs::ftruncate(&m, 0).is_err());
        let c = Memfd::from_fd(m.try_clone().unwrap().into_fd()).unwrap();
        assert_eq!(c.size(), 4096);
    }

    /// Run as a child of its own (the limit is the process's): a size beyond a lowered
    /// `ulimit -f` is `EFBIG`, where `ftruncate` raised `SIGXFSZ` and the child died of it;
    /// a size at the limit is made.
    #[test]
    fn a_size_beyond_the_file_size_limit_is_efbig_without_a_signal() {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        const CHILD: &str = "REMORA_SYS_FSIZE_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let hard = getrlimit(Resource::Fsize).maximum;
            let limit = hard.unwrap_or(u64::MAX).min(1 << 20);
            setrlimit(Resource::Fsize, Rlimit { current: Some(limit), maximum: hard }).unwrap();
            assert_eq!(file_size_limit(), Some(limit));
            let e = Memfd::create("beyond", limit + 4096).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(rustix::io::Errno::FBIG.raw_os_error()));
            assert_eq!(Memfd::create("at", limit).unwrap().size(), limit);
            println!("child done");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "memfd::tests::a_size_beyond_the_file_size_limit_is_efbig_without_a_signal"])
            .args(["--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("child done"),
            "{:?}: {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn zero_gives_back_zeros_and_keeps_the_size() {
        let m = Memfd::create("t", 3 * 4096).unwrap();
        let map = crate::Mapping::new(m.as_fd(), 0, 3 * 4096, Default::default()).unwrap();
        map.write(5000, b"written").unwrap();
        m.zero().unwrap();
        let mut back = [1u8; 7];
        map.read(5000, &mut back).unwrap();
        assert_eq!(back, [0; 7], "a mapping made before sees zeros");
        assert_eq!(rustix::fs::fstat(&m).unwrap().st_size, 3 * 4096);
        map.write(5000, b"again").unwrap();
        let mut b = [0u8; 5];
        map.read(5000, &mut b).unwrap();
        assert_eq!(&b, b"again", "and it is writable again");
    }
}
