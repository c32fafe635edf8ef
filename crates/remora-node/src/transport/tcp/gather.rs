//! A map's or a DMA's pager flow read so that a short store lands in the memory inside the
//! `recv` that drains it.
//!
//! A pager flow carries stores one way only (the answer of a DSM ping-pong comes back on
//! another flow), so the acknowledgement of its short segments never rides on data: the
//! kernel sends it as a bare ACK from inside the `recv` that drains the socket (every
//! second short segment, whatever the `TCP_QUICKACK` mode), and on loopback and veth the
//! sending and the sender's processing of it run on the reading thread's time before that
//! `recv` returns (about 2.5 µs on loopback, 4 µs across netns hosts). Read through a
//! buffer, the store was copied into the memory only after. [`Gather`] reads a frame's
//! header alone (not draining the socket when its payload follows, so nothing is
//! acknowledged), then the payload straight into its place with the buffer gathered
//! behind it (`readv`): the store is in the memory when the ACK goes, and frames that came
//! running behind it (a flush's runs) are still read in one call.

use std::io::{IoSliceMut, Read, Result};

/// A reader that serves a read of exactly `exact` bytes (a frame's header) with a plain read
/// of that size when it holds nothing buffered, and every other read with one gathering its
/// buffer behind: a short payload — a 4- or 8-byte word of a flush — still reads the frames
/// that came running behind it in the same call. After a payload over [`BULK_AFTER`] a
/// header gathers too, and a read as large as the buffer goes straight into its place, as
/// a `BufReader` reads: a stream of large frames (1 MiB DMA writes across netns hosts) read
/// header alone moved some 15 % less.
pub(super) struct Gather<R> {
    inner: R,
    exact: usize,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// The last payload was over [`BULK_AFTER`] (the first read after a header asked for
    /// more: a payload's last, short read does not count).
    bulk: bool,
    /// The last read was a header's.
    after_header: bool,
}

/// A payload over this many bytes puts the reader in its bulk way (see [`Gather`]).
const BULK_AFTER: usize = 4096;

impl<R: Read> Gather<R> {
    /// Read `inner` through a buffer of `cap` bytes, reads of up to `exact` bytes alone.
    pub(super) fn new(inner: R, exact: usize, cap: usize) -> Gather<R> {
        Gather {
            inner,
            exact,
            buf: vec![0; cap].into_boxed_slice(),
            pos: 0,
            end: 0,
            bulk: false,
            after_header: false,
        }
    }
}

impl<R: Read> Read for Gather<R> {
    fn read(&mut self, dst: &mut [u8]) -> Result<usize> {
        if dst.len() == self.exact {
            self.after_header = true;
        } else if self.after_header {
            (self.bulk, self.after_header) = (dst.len() > BULK_AFTER, false);
        }
        if self.pos < self.end {
            let n = dst.len().min(self.end - self.pos);
            dst[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        if dst.len() == self.exact {
            if !self.bulk {
                return self.inner.read(dst);
            }
        } else if dst.len() >= self.buf.len() {
            return self.inner.read(dst);
        }
        let want = dst.len();
        let n = self.inner.read_vectored(&mut [IoSliceMut::new(dst), IoSliceMut::new(&mut self.buf)])?;
        let direct = n.min(want);
        (self.pos, self.end) = (0, n - direct);
        Ok(direct)
    }

    /// A payload at least as large as the buffer: what is gathered first, then the rest
    /// straight from the stream with the stream's own `read_exact` (which polls while the
    /// frame's bytes come, `remora_sys::flow::Eager`); any other read as [`Read::read`]s.
    fn read_exact(&mut self, mut dst: &mut [u8]) -> Result<()> {
        if dst.len() >= self.buf.len() && dst.len() != self.exact {
            if self.after_header {
                (self.bulk, self.after_header) = (dst.len() > BULK_AFTER, false);
            }
            let n = dst.len().min(self.end - self.pos);
            dst[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            return self.inner.read_exact(&mut dst[n..]);
        }
        while !dst.is_empty() {
            match self.read(dst) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => dst = &mut dst[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Gather;
    use std::io::Read;

    /// A reader that hands out its bytes at most `step` at a time (in all the slices of a
    /// gathering read together, as `readv` does), counting its calls.
    struct Chunks<'a>(&'a [u8], usize, usize);

    impl Read for Chunks<'_> {
        fn read(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
            self.read_vectored(&mut [std::io::IoSliceMut::new(dst)])
        }

        fn read_vectored(&mut self, dsts: &mut [std::io::IoSliceMut<'_>]) -> std::io::Result<usize> {
            self.2 += 1;
            let mut left = self.1.min(self.0.len());
            let mut done = 0;
            for d in dsts.iter_mut() {
                let n = d.len().min(left);
                d[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                (left, done) = (left - n, done + n);
            }
            Ok(done)
        }
    }

    /// A flush's run of short stores that came in together: each 40-byte header alone, each
    /// 8-byte payload gathering the frames behind it, so a hundred frames take a few reads
    /// (two each if a short payload were read alone).
    #[test]
    fn short_payloads_read_the_frames_behind_them() {
        let frame: Vec<u8> = (0..48u8).collect();
        let src: Vec<u8> = frame.iter().copied().cycle().take(48 * 100).collect();
        let mut g = Gather::new(Chunks(&src, usize::MAX, 0), 40, 64 << 10);
        for _ in 0..100 {
            let (mut hdr, mut word) = ([0u8; 40], [0u8; 8]);
            g.read_exact(&mut hdr).unwrap();
            g.read_exact(&mut word).unwrap();
            assert_eq!((&hdr[..], &word[..]), (&frame[..40], &frame[40..]));
        }
        assert!(g.inner.2 <= 3, "{} reads for 100 frames", g.inner.2);
    }

    /// A source that counts the `read_exact` calls made on it (the eager stream's way).
    struct Exacts<'a>(Chunks<'a>, usize);

    impl Read for Exacts<'_> {
        fn read(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
            self.0.read(dst)
        }

        fn read_vectored(&mut self, dsts: &mut [std::io::IoSliceMut<'_>]) -> std::io::Result<usize> {
            self.0.read_vectored(dsts)
        }

        fn read_exact(&mut self, dst: &mut [u8]) -> std::io::Result<()> {
            self.1 += 1;
            let mut at = 0;
            while at < dst.len() {
                at += self.0.read(&mut dst[at..])?;
            }
            Ok(())
        }
    }

    /// A payload as large as the buffer takes what was gathered, then the rest in one
    /// `read_exact` of the stream (which polls while the frame comes); a short one never
    /// reaches it.
    #[test]
    fn a_large_payload_is_the_streams_own_exact_read() {
        let src: Vec<u8> = (0..(40 + 300 + 40 + 8) as u32).map(|i| (i % 253) as u8).collect();
        let mut g = Gather::new(Exacts(Chunks(&src, 100, 0), 0), 40, 64);
        let (mut hdr, mut payload, mut word) = ([0u8; 40], [0u8; 300], [0u8; 8]);
        g.read_exact(&mut hdr).unwrap();
        g.read_exact(&mut payload).unwrap();
        assert_eq!(g.inner.1, 1, "one exact read of the stream for the payload");
        g.read_exact(&mut hdr).unwrap();
        g.read_exact(&mut word).unwrap();
        assert_eq!(g.inner.1, 1, "headers and short payloads are gathered reads");
        assert_eq!(&payload[..], &src[40..340]);
        assert_eq!((&hdr[..], &word[..]), (&src[340..380], &src[380..]));
    }

    /// Bytes come out in order whatever the mix of small and large reads and of the
    /// source's chunk sizes.
    #[test]
    fn reads_of_any_size_give_the_bytes_in_order() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        for step in [1, 3, 40, 48, 100, 4096, 10_000] {
            let mut g = Gather::new(Chunks(&src, step, 0), 40, 64);
            let mut out = Vec::new();
            let sizes = [40, 8, 40, 200, 3, 40, 1000, 40, 64, 65];
            let mut i = 0;
            while out.len() < src.len() {
                let n = sizes[i % sizes.len()].min(src.len() - out.len());
                let mut b = vec![0; n];
                g.read_exact(&mut b).unwrap();
                out.extend_from_slice(&b);
                i += 1;
            }
            assert_eq!(out, src, "chunks of {step}");
            assert_eq!(g.read(&mut [0; 8]).unwrap(), 0, "the end");
        }
    }

    /// After a large payload read in pieces, the last one short, a header gathers what
    /// follows it (one call for a header and 60 000 bytes behind it); a payload as large as
    /// the buffer is read straight.
    #[test]
    fn after_a_large_payload_headers_gather_as_a_buffered_reader_does() {
        let src: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        // The first frame alone at first: a header, then its payload in two reads.
        let mut g = Gather::new(Chunks(&src[..100_000], 99_000, 0), 40, 64 << 10);
        let mut first = [0u8; 40];
        g.read_exact(&mut first).unwrap();
        let mut big = vec![0u8; 99_960];
        g.read_exact(&mut big).unwrap();
        assert_eq!(g.inner.2, 3, "a header, the payload straight, its short rest");
        // The next frames come, all at once.
        (g.inner.0, g.inner.1, g.inner.2) = (&src[100_000..], usize::MAX, 0);
        let mut hdr = [0u8; 40];
        g.read_exact(&mut hdr).unwrap();
        let mut rest = vec![0u8; 60_000];
        g.read_exact(&mut rest).unwrap();
        assert_eq!(g.inner.2, 1, "the header gathered the payload behind it");
        let got = [&first[..], &big[..], &hdr[..], &rest[..]].concat();
        assert_eq!(got, &src[..160_040]);
    }
}
