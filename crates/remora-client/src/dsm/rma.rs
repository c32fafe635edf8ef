//! The memory an RMA over a pager flow moves (`scif_writeto`, `scif_readfrom` and friends to
//! another host): the bytes go straight between the socket and the caller's memory — a
//! buffer, a region of the program's memory, or the pieces of its registered windows — with no copy in between
//! ([`super::range_write`] and [`super::range_read`], in `flow.rs`, move them).

use remora_sys::user_memory::UserRegion;
use remora_sys::Mapping;
use std::io::{Read, Write};
use std::sync::Arc;

/// A piece of local memory: the mapping, the offset in it and the length.
pub type Piece = (Arc<Mapping>, usize, usize);

/// Where the bytes of an RMA to another host come from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// A buffer of the caller's (`scif_vwriteto`).
    Buf(&'a [u8]),
    /// Pieces of mappings, taken in order (a registered range: `scif_writeto`).
    Pieces(&'a [Piece]),
    /// A region of the program's memory (`SCIStartDmaTransferMem`, RSM `put` across hosts).
    Region(UserRegion),
}

/// Where the bytes of an RMA from another host go.
pub enum Sink<'a> {
    /// A buffer of the caller's (`scif_vreadfrom`).
    Buf(&'a mut [u8]),
    /// Pieces of mappings, filled in order (a registered range: `scif_readfrom`).
    Pieces(&'a [Piece]),
    /// A region of the program's memory (`SCIStartDmaTransferMem`, RSM `get` across hosts).
    Region(UserRegion),
}

/// The runs of `pieces` that hold bytes `at..at + n` of their concatenation.
fn runs(
    pieces: &[Piece],
    mut at: usize,
    mut n: usize,
) -> impl Iterator<Item = (&Arc<Mapping>, usize, usize)> {
    pieces.iter().filter_map(move |(m, off, len)| {
        if n == 0 {
            return None;
        }
        if at >= *len {
            at -= len;
            return None;
        }
        let k = n.min(len - at);
        let run = (m, off + at, k);
        at = 0;
        n -= k;
        Some(run)
    })
}

/// Whether `addr..addr + len` is memory a map of another host's segment pages in: the
/// kernel's copy between it and a socket cannot fault its missing pages in (the userfaultfd
/// serves faults of user mode only), and a copy in user mode under a pager flow's lock
/// could wait for the pager, which may need that same flow.
fn pages_in(addr: usize, len: usize) -> bool {
    remora_sys::uffd::overlaps_registered(addr, len)
}

impl Source<'_> {
    /// Whether some of the bytes are memory a DSM map pages in (see [`pages_in`]).
    pub(super) fn pages_in(&self) -> bool {
        match self {
            Source::Buf(b) => pages_in(b.as_ptr() as usize, b.len()),
            Source::Pieces(_) => false,
            Source::Region(r) => pages_in(r.addr(), r.len()),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Source::Buf(b) => b.len(),
            Source::Pieces(p) => p.iter().map(|(_, _, n)| n).sum(),
            Source::Region(r) => r.len(),
        }
    }

    /// Write `head`, then bytes `at..at + n`, to `w`: the header and the first run in one
    /// gathering write.
    pub(super) fn send(&self, head: &[u8], at: usize, n: usize, w: &mut impl Write) -> std::io::Result<()> {
        match self {
            Source::Buf(b) => {
                let data = b.get(at..at + n).ok_or_else(|| std::io::Error::from_raw_os_error(34))?;
                remora_sys::write_all_vectored(
                    w,
                    &mut [std::io::IoSlice::new(head), std::io::IoSlice::new(data)],
                )
            }
            Source::Pieces(p) => {
                let mut head = Some(head);
                for (m, off, k) in runs(p, at, n) {
                    match head.take() {
                        Some(h) => m.write_to_after(h, off, k, w)?,
                        None => m.write_to(off, k, w)?,
                    }
                }
                match head {
                    Some(h) => w.write_all(h),
                    None => Ok(()),
                }
            }
            Source::Region(r) => r.write_to_after(head, at, n, w),
        }
    }
}

impl Sink<'_> {
    /// The same sink, borrowed for a shorter while (to try one path, then another).
    pub fn reborrow(&mut self) -> Sink<'_> {
        match self {
            Sink::Buf(b) => Sink::Buf(b),
            Sink::Pieces(p) => Sink::Pieces(p),
            Sink::Region(r) => Sink::Region(*r),
        }
    }

    /// Whether some of the bytes are memory a DSM map pages in (see [`pages_in`]).
    pub(super) fn pages_in(&self) -> bool {
        match self {
            Sink::Buf(b) => pages_in(b.as_ptr() as usize, b.len()),
            Sink::Pieces(_) => false,
            Sink::Region(r) => pages_in(r.addr(), r.len()),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Sink::Buf(b) => b.len(),
            Sink::Pieces(p) => p.iter().map(|(_, _, n)| n).sum(),
            Sink::Region(r) => r.len(),
        }
    }

    /// Fill bytes `at..at + n` from `r`.
    pub(super) fn fill(&mut self, at: usize, n: usize, r: &mut impl Read) -> std::io::Result<()> {
        match self {
            Sink::Buf(b) => {
                let out = b.get_mut(at..at + n).ok_or_else(|| std::io::Error::from_raw_os_error(34))?;
                r.read_exact(out)
            }
            Sink::Pieces(p) => {
                for (m, off, k) in runs(p, at, n) {
                    m.fill_from_reader(off, k, r)?;
                }
                Ok(())
            }
            Sink::Region(u) => u.fill_from_reader(at, n, r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_a_range_across_pieces() {
        let fd = remora_sys::Memfd::create("runs", 3 * 4096).expect("memfd");
        let m = Arc::new(
            Mapping::new(remora_sys::AsFd::as_fd(&fd), 0, 3 * 4096, Default::default()).expect("map"),
        );
        let p: Vec<Piece> = vec![(m.clone(), 0, 100), (m.clone(), 4096, 50), (m.clone(), 8192, 10)];
        let got: Vec<_> = runs(&p, 90, 70).map(|(_, o, n)| (o, n)).collect();
        assert_eq!(got, vec![(90, 10), (4096, 50), (8192, 10)]);
        let got: Vec<_> = runs(&p, 100, 5).map(|(_, o, n)| (o, n)).collect();
        assert_eq!(got, vec![(4096, 5)]);
        assert_eq!(runs(&p, 160, 0).count(), 0);
        assert_eq!(Source::Pieces(&p).len(), 160);
    }
}
