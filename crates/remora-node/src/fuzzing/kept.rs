//! Shared memory a fuzz target makes once per process and gives back to every input as it
//! was made. Making a region per input (`memfd_create`, `ftruncate`, three `mmap`s and
//! their `munmap`s, an eventfd) cost the shared-memory targets most of their time; giving
//! it back costs one `fallocate` (the pages are dropped and read zero again, in every
//! mapping) and the rewrite of the few lines that were not zero when it was made.

use remora_sys::{AsFd, Mapping, Memfd};
use std::io;

/// The bytes of one line of a snapshot.
const LINE: usize = 64;

/// A memfd, a mapping of all of it (the hostile writer's view), and what a target keeps
/// mapped through its own API (`held`), all made once.
pub(crate) struct Kept<T> {
    /// The memory.
    pub(crate) fd: Memfd,
    /// A mapping of all of it, through which scripts patch it.
    pub(crate) raw: Mapping,
    /// What the target holds on it (its API's view: a region, a page).
    pub(crate) held: T,
    /// The lines that were not zero when it was made: (offset, bytes).
    made: Vec<(usize, [u8; LINE])>,
}

impl<T> Kept<T> {
    /// Keep `fd` as it is now (as it was made), and `held(fd)`.
    ///
    /// # Errors
    /// The errno of mapping or reading it, or `held`'s.
    pub(crate) fn new(fd: Memfd, held: impl FnOnce(&Memfd) -> io::Result<T>) -> io::Result<Kept<T>> {
        let raw = Mapping::new(fd.as_fd(), 0, fd.size() as usize, Default::default())?;
        let mut made = Vec::new();
        let mut line = [0u8; LINE];
        for off in (0..raw.len()).step_by(LINE) {
            let n = LINE.min(raw.len() - off);
            line[n..].fill(0);
            raw.read(off, &mut line[..n])?;
            if line.iter().any(|b| *b != 0) {
                made.push((off, line));
            }
        }
        let held = held(&fd)?;
        Ok(Kept { fd, raw, held, made })
    }

    /// Give the memory back as it was made: every byte zero, then the lines that were not.
    /// Whatever the last input wrote (a patch, a ring's traffic) is gone.
    ///
    /// # Panics
    /// When the memfd cannot be zeroed or written (never for a memfd this process made):
    /// an input must not run on what another left.
    pub(crate) fn renew(&self) -> &Kept<T> {
        self.fd.zero().expect("a kept memfd is zeroed");
        for (off, line) in &self.made {
            let n = LINE.min(self.raw.len() - off);
            self.raw.write(*off, &line[..n]).expect("a line inside the memfd");
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use remora_sys::msgring::MsgRegion;

    #[test]
    fn renew_gives_back_the_region_as_made() {
        let fd = MsgRegion::create(4096).unwrap();
        let first = Mapping::new(fd.as_fd(), 0, fd.size() as usize, Default::default()).unwrap();
        let mut made = vec![0u8; first.len()];
        first.read(0, &mut made).unwrap();
        let kept = Kept::new(fd, |fd| MsgRegion::open(fd.as_fd())).unwrap();
        assert!(!kept.made.is_empty(), "a region's header is not zero");
        // A ring's traffic, a scribble over the header and the last byte.
        assert_eq!(kept.held.push(0, b"traffic").0, 7);
        kept.raw.write(0, &[0xa5; 100]).unwrap();
        kept.raw.write(kept.raw.len() - 1, &[1]).unwrap();
        kept.renew();
        let mut now = vec![1u8; first.len()];
        first.read(0, &mut now).unwrap();
        assert!(now == made, "every byte as it was made");
        assert!(!kept.held.has_data(0), "the ring is empty again");
        assert!(MsgRegion::open(kept.fd.as_fd()).is_ok(), "and opens as a region");
    }
}
