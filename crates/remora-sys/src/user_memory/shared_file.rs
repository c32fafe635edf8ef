//! The program's own shared memory in a window (`scif_register` of a `MAP_SHARED`
//! mapping): the file behind the mapping, when it can be shared safely.
//!
//! Such pages cannot move (other mappings of the file, in this process or others, must
//! keep seeing them), so the window is the file itself, where the mapping lies in it. Only
//! a memfd sealed against shrinking qualifies: the daemon and the peers map the window, and
//! a file its owner may truncate would make their loads and stores fault (SIGBUS) — a
//! daemon would die of it. A `shm_open` or regular file, or a memfd without the seal, stays
//! `EFAULT`.

use super::maps::Vma;
use crate::Memfd;
use rustix::fs::{Mode, OFlags};
use std::sync::Arc;

/// The sealed memfds found while one window is made, by device and inode (`None`:
/// looked, none).
#[derive(Default)]
pub(super) struct Files(Vec<(super::FileId, Option<Arc<Memfd>>)>);

impl Files {
    /// A descriptor of the sealed memfd that `v` maps, holding all of the mapping.
    pub(super) fn sealed(&mut self, v: &Vma<'_>) -> Option<Arc<Memfd>> {
        if let Some((_, found)) = self.0.iter().find(|(id, _)| *id == v.file()) {
            return found.clone();
        }
        let found = find(v).map(Arc::new);
        self.0.push((v.file(), found.clone()));
        found
    }
}

/// Whether `fd` is the file `v` maps.
fn is_file_of(fd: &Memfd, v: &Vma<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        let dev = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
        st.st_ino == v.ino && dev == v.dev
    })
}

fn find(v: &Vma<'_>) -> Option<Memfd> {
    let rw = OFlags::RDWR | OFlags::CLOEXEC;
    // The mapping's own file (needs privileges), else a descriptor of the program's that
    // names the same file, opened anew (a descriptor of our own, read-write).
    let own = rustix::fs::open(format!("/proc/self/map_files/{:x}-{:x}", v.lo, v.hi), rw, Mode::empty());
    let fd = match own {
        Ok(fd) => Memfd::from_fd(fd).ok().filter(|m| is_file_of(m, v)),
        Err(_) => None,
    };
    let fd = fd.or_else(|| {
        std::fs::read_dir("/proc/self/fd").ok()?.flatten().find_map(|e| {
            let path = e.path();
            let target = std::fs::read_link(&path).ok()?;
            if !target.to_string_lossy().starts_with("/memfd:") {
                return None;
            }
            let fd = Memfd::from_fd(rustix::fs::open(&path, rw, Mode::empty()).ok()?).ok()?;
            is_file_of(&fd, v).then_some(fd)
        })
    })?;
    let len = (v.hi - v.lo) as u64;
    let inside = v.off.checked_add(len).is_some_and(|e| e <= fd.size());
    (fd.is_size_sealed() && inside && is_memfd(&fd)).then_some(fd)
}

/// Whether `fd` is a memfd (what a daemon takes as a window's memory).
fn is_memfd(fd: &Memfd) -> bool {
    use std::os::fd::{AsFd, AsRawFd};
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
        .is_ok_and(|p| p.to_string_lossy().starts_with("/memfd:"))
}
