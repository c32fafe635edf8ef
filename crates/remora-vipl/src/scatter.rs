//! A send's payload into the buffers of the peer's receive, without a look on the way that
//! waits for a line another core or memory holds (issue 15, the one-host 64 KiB stream).
//!
//! Where a receive's buffers lie (its ring A entry's chunk count and first chunk) is noted
//! when the sender learns the receive's size: the sizes are read in batches, so those loads
//! overlap, and the first chunk lies on the same line as the size. The entry itself is
//! used again only after 256 receives, a dozen MiB of copies later on a 64 KiB stream: read
//! at the copy, its line came from memory, and the copy's address waited for it.
//! An entry's bytes do not change while the receive is posted (the peer writes entry `k`
//! before its posted count covers `k`, and entry `k` again only for receive `k + 256`, once
//! `k` completed), so the note is as good as the entry. A note carries the receive's number
//! and the connection's: a receive learned under an earlier connection reads the entry.

use crate::layout::{self, Chunk, Head, ENTRIES};
use crate::link::{Link, Miss, PieceHint};
use crate::vi::ViInner;
use crate::{Error, Result};
use remora_sisci::UserRegion;

impl ViInner {
    /// Copy the sources, in order, into the buffers of the peer's receive `k`. Its pieces
    /// come from the note taken when it was learned ([`layout::Head`]), else from the ring A entry,
    /// read one at a time as the copy reaches them (most receives have one: no buffer for
    /// all the entry could hold is cleared per message). `heads` and `hint` are the send
    /// queue's.
    pub(crate) fn scatter(
        &self,
        heads: &[Head],
        hint: &mut PieceHint,
        link: &Link,
        k: u64,
        sources: &[UserRegion],
    ) -> std::result::Result<(), Miss> {
        let at = layout::entry_at(k);
        let noted =
            heads.get(k as usize % ENTRIES).filter(|h| h.k == k + 1 && h.conn == self.conn()).copied();
        let (chunks, first) = match noted {
            Some(h) => (h.chunks as usize, Some(h.first)),
            None => {
                let mut head = [0u8; 16];
                self.map.read(at, &mut head)?;
                if layout::entry_conn(&head) != self.conn() {
                    return Err(Error::Descriptor("the receive is not of this connection".into()).into());
                }
                (layout::entry_chunks(&head), None)
            }
        };
        let chunk = |i: usize| -> Result<Chunk> {
            if i >= chunks {
                return Err(Error::Descriptor("receive smaller than described".into()));
            }
            if let (0, Some(c)) = (i, first) {
                return Ok(c);
            }
            let mut b = [0u8; 16];
            self.map.read(at + 16 + 16 * i, &mut b)?;
            Ok(layout::chunk_at(&b, 0))
        };
        let mut ci = 0usize;
        let mut c = None;
        let mut coff = 0usize;
        for src in sources {
            let mut soff = 0usize;
            while soff < src.len() {
                let now = match c {
                    Some(now) => now,
                    None => *c.insert(chunk(ci)?),
                };
                let n = (now.len as usize - coff).min(src.len() - soff);
                link.write_piece_hinted(&self.nic, hint, now.seg, now.off as usize + coff, src, soff, n)?;
                soff += n;
                coff += n;
                if coff == now.len as usize {
                    ci += 1;
                    c = None;
                    coff = 0;
                }
            }
        }
        Ok(())
    }
}
