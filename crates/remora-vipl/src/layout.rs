//! Where things lie: VIA's descriptor format (as programs lay it out in their memory), and
//! the two kinds of segment a NIC shares with its peers.
//!
//! A VI's own segment is written by its peer and read only by its owner, so every poll is
//! of local memory and every transfer a write, as on SCI:
//!
//! ```text
//!   0  peer_posted   receives the peer has described in ring A (a count)
//!   8  peer_ready    the peer has linked to this VI and described its receives (1)
//!  16  peer_table    the peer's count of changes to its memory table (across hosts only:
//!                    a slot read earlier is used again while this has not moved)
//!  64  done          receives of the owner the peer has completed in ring B (a count;
//!                    written only across hosts, where it orders the entries' arrival)
//! 128  peer_waiting  the peer blocks for the owner's messages: ring its doorbell (1)
//! 192  peer_state    0 connected, 1 the peer disconnected, 2 the peer saw an error (+ code << 8)
//! 256  ring A        ENTRIES × 512 bytes: the peer's posted receives (where to write)
//!      ring B        ENTRIES × 64 bytes: completions of the owner's receives
//! ```
//!
//! Every word the peer stores here, and every ring B entry's sequence number, is
//! [`tagged`]: its value in the low 32 bits (a count's low 32 bits), the owner's
//! connection number (which the peer learnt when they connected) in the high 32; a ring A
//! entry carries the number too. A VI reused after a disconnect has a new number, so a
//! store of its previous peer that lands late (across hosts one still in that peer's
//! channel when the segment was zeroed for the next connection; on one host one of a
//! peer that has not noticed the disconnect yet) is never taken for the new peer's: a
//! completion of the old connection is not seen, an old count counts nothing, an old flag
//! is down.
//!
//! The words sit on cache lines of their own, so a receiver polling one never shares its
//! line with a word the peer writes for another reason. A ring B entry is one cache line:
//! the completion, up to [`INLINE`] bytes of the payload itself, and last its sequence
//! number (the receive's number plus one, [`tagged`]), stored after everything else. On one host a
//! receiver polls only that word: one line crosses between the cores per message, as in a
//! raw shared-memory ping-pong. A payload that fits travels in the entry and the receiver
//! copies it into its buffer when it takes the completion; a longer one is written
//! straight into the receiver's buffer before the entry.
//!
//! A NIC's table segment holds one slot of [`SLOT`] bytes per registered region, at the
//! memory handle modulo [`SLOTS`]: base, length, protection tag, handle, flags, and the
//! pieces (segment id, offset, address, length) the region's pages live in. Peers read it
//! for RDMA.

use crate::{Error, Result};

/// Receive descriptors a VI queue holds (`MaxDescriptorsPerQueue`).
pub const ENTRIES: usize = 256;
/// Bytes of one ring A entry.
pub const ENTRY: usize = 512;
/// Most pieces one posted receive can name.
pub const MAX_CHUNKS: usize = (ENTRY - 16) / 16;
/// Offsets in a VI segment.
pub const PEER_POSTED: usize = 0;
// Across hosts a sender short of receives sleeps on this count, and the node wakes it only
// because it is the segment's first word: remora-node's channel watch wakes the watched
// word (the done count) and the first word after a store touching them
// (`transport/tcp/pager.rs`, `Watch::after_store`). Moving the count needs a wake there.
const _: () = assert!(PEER_POSTED == 0, "the node wakes the first word: see above");
/// See the module doc.
pub const PEER_READY: usize = 8;
/// See the module doc.
pub const PEER_TABLE: usize = 16;
/// See the module doc.
pub const DONE: usize = 64;
/// See the module doc.
pub const PEER_WAITING: usize = 128;
/// See the module doc.
pub const PEER_STATE: usize = 192;
/// Where ring A starts.
pub const RING_A: usize = 256;
/// Where ring B starts.
pub const RING_B: usize = RING_A + ENTRIES * ENTRY;
/// Bytes of one ring B entry (one cache line).
pub const COMPLETION: usize = 64;
/// Payload bytes a ring B entry carries itself.
pub const INLINE: usize = 40;
/// Where a ring B entry's sequence number lies in it.
pub const SEQ: usize = 56;
/// The byte offset of ring B entry `k`.
pub fn completion_at(k: u64) -> usize {
    RING_B + (k as usize % ENTRIES) * COMPLETION
}
/// A word for the owner of a VI segment whose connection number is `conn`: `v`'s low 32
/// bits (the low half of a count: a count is only ever compared with one near it), the
/// number in the high 32 (see the module doc).
#[inline]
pub fn tagged(conn: u32, v: u64) -> u64 {
    (u64::from(conn) << 32) | (v & 0xFFFF_FFFF)
}

/// The value of a [`tagged`] word for the owner whose connection number is `conn`, `None`
/// when the word is of another connection. A zero word (the segment as zeroed) is 0.
#[inline]
pub fn untagged(conn: u32, w: u64) -> Option<u32> {
    if w == 0 {
        return Some(0);
    }
    ((w >> 32) as u32 == conn).then_some(w as u32)
}

/// The count a [`tagged`] word stands for, given a count `near` it (within 2^31 either
/// way): its low 32 bits widened to 64. A word of another connection counts 0.
#[inline]
pub fn count_in(conn: u32, w: u64, near: u64) -> u64 {
    let Some(low) = untagged(conn, w) else { return 0 };
    let d = low.wrapping_sub(near as u32) as i32;
    if d >= 0 {
        near + d as u64
    } else {
        near.saturating_sub(u64::from(d.unsigned_abs()))
    }
}

/// The byte offset of ring A entry `k`.
pub fn entry_at(k: u64) -> usize {
    RING_A + (k as usize % ENTRIES) * ENTRY
}
/// The size of a VI segment (whole pages).
pub fn vi_segment_size() -> usize {
    let n = RING_B + ENTRIES * COMPLETION;
    n.div_ceil(remora_sys::page_size()) * remora_sys::page_size()
}

/// Region slots of a NIC table (`MaxRegisterRegions`).
pub const SLOTS: usize = 4096;
/// Bytes of a slot.
pub const SLOT: usize = 256;
/// Most pieces a region may span.
pub const MAX_PIECES: usize = (SLOT - 32) / 32;
/// Slot flag: in use.
pub const SLOT_VALID: u32 = 1;
/// Slot flag: RDMA write enabled.
pub const SLOT_RDMA_WRITE: u32 = 2;
/// Slot flag: RDMA read enabled.
pub const SLOT_RDMA_READ: u32 = 4;

/// `VIP_DESCRIPTOR_ALIGNMENT`.
pub const DESCRIPTOR_ALIGNMENT: usize = 64;
/// Bytes of the control segment.
pub const CONTROL: usize = 32;
/// Bytes of a data or address segment.
pub const SEGMENT: usize = 16;
/// Most data segments a descriptor may carry (`MaxSegmentsPerDesc`).
pub const MAX_SEGMENTS: usize = 252;

/// Control bits (`VIP_CONTROL_*`).
pub mod control {
    /// Send or receive.
    pub const OP_SENDRECV: u16 = 0x0;
    /// RDMA write.
    pub const OP_RDMAWRITE: u16 = 0x1;
    /// RDMA read.
    pub const OP_RDMAREAD: u16 = 0x2;
    /// The operation bits.
    pub const OP_MASK: u16 = 0x3;
    /// Immediate data present.
    pub const IMMEDIATE: u16 = 0x4;
    /// Queue fence.
    pub const QFENCE: u16 = 0x8;
    /// Bits that must be zero.
    pub const RESERVED: u16 = 0xFFF0;
}

/// Status bits (`VIP_STATUS_*`).
pub mod status {
    /// Complete.
    pub const DONE: u32 = 0x1;
    /// Malformed descriptor.
    pub const FORMAT_ERROR: u32 = 0x2;
    /// Memory not registered, or with another protection tag.
    pub const PROTECTION_ERROR: u32 = 0x4;
    /// The receive buffer was too small.
    pub const LENGTH_ERROR: u32 = 0x8;
    /// Part of the data was lost.
    pub const PARTIAL_ERROR: u32 = 0x10;
    /// Flushed by a disconnect.
    pub const DESC_FLUSHED_ERROR: u32 = 0x20;
    /// The transport failed.
    pub const TRANSPORT_ERROR: u32 = 0x40;
    /// The remote memory refused the RDMA.
    pub const RDMA_PROT_ERROR: u32 = 0x80;
    /// The remote descriptor was bad.
    pub const REMOTE_DESC_ERROR: u32 = 0x100;
    /// Every error bit.
    pub const ERROR_MASK: u32 = 0x1FE;
    /// A send.
    pub const OP_SEND: u32 = 0x0;
    /// A receive.
    pub const OP_RECEIVE: u32 = 0x10000;
    /// An RDMA write.
    pub const OP_RDMA_WRITE: u32 = 0x20000;
    /// A receive consumed by a peer's RDMA write with immediate data.
    pub const OP_REMOTE_RDMA_WRITE: u32 = 0x30000;
    /// An RDMA read.
    pub const OP_RDMA_READ: u32 = 0x40000;
    /// Immediate data arrived.
    pub const IMMEDIATE: u32 = 0x80000;
}

/// One data segment (`VIP_DATA_SEGMENT`) or, first on an RDMA descriptor, the address
/// segment (`VIP_ADDRESS_SEGMENT`, whose length field is reserved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataSegment {
    /// The address.
    pub addr: u64,
    /// The memory handle of the region it lies in.
    pub handle: u32,
    /// Its length.
    pub len: u32,
}

impl DataSegment {
    /// From the 16 bytes of a data or address segment.
    pub fn decode(b: &[u8; SEGMENT]) -> DataSegment {
        DataSegment { addr: u64_at(b, 0), handle: u32_at(b, 8), len: u32_at(b, 12) }
    }
}

/// A VIA descriptor as a program writes it (`VIP_DESCRIPTOR`): the control segment and the
/// segments that follow it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// `CS.Control`.
    pub control: u16,
    /// `CS.ImmediateData`.
    pub immediate: u32,
    /// `CS.Length`.
    pub length: u32,
    /// `CS.Status`.
    pub status: u32,
    /// `CS.SegCount` segments.
    pub segments: Vec<DataSegment>,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// The u64 whose native bytes lie at `o`.
fn u64_at_ne(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_ne_bytes(a)
}

/// A little-endian u64 at `o`.
pub fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

impl Descriptor {
    /// The segment count in a control segment's bytes.
    pub fn seg_count(control: &[u8; CONTROL]) -> usize {
        usize::from(u16_at(control, 12))
    }

    /// Decode a control segment and the `SegCount` segments after it.
    ///
    /// # Errors
    /// [`Error::Descriptor`] when `bytes` is shorter than they need.
    pub fn decode(bytes: &[u8]) -> Result<Descriptor> {
        if bytes.len() < CONTROL {
            return Err(Error::Descriptor("shorter than a control segment".into()));
        }
        let n = usize::from(u16_at(bytes, 12));
        if bytes.len() < CONTROL + n * SEGMENT {
            return Err(Error::Descriptor("segments missing".into()));
        }
        let segments = (0..n)
            .map(|i| {
                let o = CONTROL + i * SEGMENT;
                DataSegment {
                    addr: u64_at(bytes, o),
                    handle: u32_at(bytes, o + 8),
                    len: u32_at(bytes, o + 12),
                }
            })
            .collect();
        Ok(Descriptor {
            control: u16_at(bytes, 14),
            immediate: u32_at(bytes, 20),
            length: u32_at(bytes, 24),
            status: u32_at(bytes, 28),
            segments,
        })
    }

    /// The bytes of the descriptor (`Next` and `NextHandle` zero).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; CONTROL + self.segments.len() * SEGMENT];
        b[12..14].copy_from_slice(&(self.segments.len() as u16).to_le_bytes());
        b[14..16].copy_from_slice(&self.control.to_le_bytes());
        b[20..24].copy_from_slice(&self.immediate.to_le_bytes());
        b[24..28].copy_from_slice(&self.length.to_le_bytes());
        b[28..32].copy_from_slice(&self.status.to_le_bytes());
        for (i, s) in self.segments.iter().enumerate() {
            let o = CONTROL + i * SEGMENT;
            b[o..o + 8].copy_from_slice(&s.addr.to_le_bytes());
            b[o + 8..o + 12].copy_from_slice(&s.handle.to_le_bytes());
            b[o + 12..o + 16].copy_from_slice(&s.len.to_le_bytes());
        }
        b
    }

    /// The operation (`control & OP_MASK`).
    pub fn op(&self) -> u16 {
        self.control & control::OP_MASK
    }
}

/// Where one piece of a posted receive lies: `len` bytes at `off` of segment `seg` of the
/// receiver's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Chunk {
    /// The segment id.
    pub seg: u32,
    /// Bytes.
    pub len: u32,
    /// Offset in the segment.
    pub off: u64,
}

/// Where a ring A entry's connection number lies in it: the owner's of the segment it is
/// written into (see [`tagged`]). An entry of another connection is no receive.
pub const ENTRY_CONN: usize = 8;

/// Encode a ring A entry for the segment owner whose connection number is `conn` into
/// `b`; the bytes used.
pub fn encode_entry(total: u32, conn: u32, chunks: &[Chunk], b: &mut [u8; ENTRY]) -> usize {
    encode_entry_into(total, conn, chunks, b)
}

/// Encode a ring A entry into `b` (at least 16 bytes), with as many chunks as it holds;
/// the bytes used.
pub fn encode_entry_into(total: u32, conn: u32, chunks: &[Chunk], b: &mut [u8]) -> usize {
    let n = chunks.len().min(MAX_CHUNKS).min(b.len().saturating_sub(16) / 16);
    b[0..4].copy_from_slice(&total.to_le_bytes());
    b[4..8].copy_from_slice(&(n as u32).to_le_bytes());
    b[ENTRY_CONN..ENTRY_CONN + 4].copy_from_slice(&conn.to_le_bytes());
    for (i, c) in chunks.iter().take(n).enumerate() {
        let o = 16 + i * 16;
        b[o..o + 4].copy_from_slice(&c.seg.to_le_bytes());
        b[o + 4..o + 8].copy_from_slice(&c.len.to_le_bytes());
        b[o + 8..o + 16].copy_from_slice(&c.off.to_le_bytes());
    }
    16 + n * 16
}

/// The chunk count in a ring A entry's first 16 bytes.
pub fn entry_chunks(head: &[u8; 16]) -> usize {
    (u32_at(head, 4) as usize).min(MAX_CHUNKS)
}

/// The connection number in a ring A entry's first 16 bytes.
pub fn entry_conn(head: &[u8; 16]) -> u32 {
    u32_at(head, ENTRY_CONN)
}

/// Decode a ring A entry (at least its first `16 + 16 × count` bytes) into `out`: the
/// buffer's total length and the chunks.
pub fn decode_entry<'a>(b: &[u8], out: &'a mut [Chunk; MAX_CHUNKS]) -> (u32, &'a [Chunk]) {
    let n = (u32_at(b, 4) as usize).min(MAX_CHUNKS).min(b.len().saturating_sub(16) / 16);
    for (i, c) in out.iter_mut().take(n).enumerate() {
        *c = chunk_at(b, 16 + i * 16);
    }
    (u32_at(b, 0), &out[..n])
}

/// The piece of a ring A entry whose 16 bytes start at `o` of `b`.
pub(crate) fn chunk_at(b: &[u8], o: usize) -> Chunk {
    Chunk { seg: u32_at(b, o), len: u32_at(b, o + 4), off: u64_at(b, o + 8) }
}

/// A ring B entry: a completed receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Completion {
    /// Bytes that arrived.
    pub len: u32,
    /// Immediate data.
    pub immediate: u32,
    /// Status bits.
    pub status: u32,
}

/// Bit of a ring B entry's inline word: the payload is in the entry.
const INLINE_FLAG: u32 = 1 << 31;

/// Where a ring B entry's inline payload starts in it (after [`Completion::words`]).
pub const INLINE_AT: usize = 16;

impl Completion {
    /// A completion of `len` bytes with status bits `bits`, carrying `immediate` data (and
    /// [`status::IMMEDIATE`] set) when there is some.
    #[inline(always)]
    pub(crate) fn new(len: u32, bits: u32, immediate: Option<u32>) -> Completion {
        match immediate {
            Some(immediate) => Completion { len, immediate, status: bits | status::IMMEDIATE },
            None => Completion { len, immediate: 0, status: bits },
        }
    }

    /// The entry's bytes before its sequence number, with `inline` payload bytes (at most
    /// [`INLINE`]) when the payload travels in it.
    pub fn encode(&self, inline: Option<&[u8]>) -> [u8; SEQ] {
        let mut b = [0u8; SEQ];
        let n = inline.map(|d| d.len().min(INLINE));
        let [w0, w1] = self.words(n);
        b[0..8].copy_from_slice(&w0.to_ne_bytes());
        b[8..16].copy_from_slice(&w1.to_ne_bytes());
        if let (Some(data), Some(n)) = (inline, n) {
            b[INLINE_AT..INLINE_AT + n].copy_from_slice(&data[..n]);
        }
        b
    }

    /// The entry's first two words as they lie in memory (store them as native words):
    /// the completion, and the length of a payload of `inline` bytes (at most [`INLINE`])
    /// that travels in the entry at [`INLINE_AT`].
    pub fn words(&self, inline: Option<usize>) -> [u64; 2] {
        let pair = |a: u32, b: u32| {
            let mut w = [0u8; 8];
            w[..4].copy_from_slice(&a.to_le_bytes());
            w[4..].copy_from_slice(&b.to_le_bytes());
            u64::from_ne_bytes(w)
        };
        let word = inline.map_or(0, |n| INLINE_FLAG | n.min(INLINE) as u32);
        [pair(self.len, self.immediate), pair(self.status, word)]
    }

    /// From an entry's first two words (as [`Completion::words`] made them): the
    /// completion, and the length of the payload when it travelled in the entry.
    pub fn from_words(w: [u64; 2]) -> (Completion, Option<usize>) {
        let (a, b) = (w[0].to_ne_bytes(), w[1].to_ne_bytes());
        let c = Completion { len: u32_at(&a, 0), immediate: u32_at(&a, 4), status: u32_at(&b, 0) };
        let word = u32_at(&b, 4);
        (c, (word & INLINE_FLAG != 0).then(|| (word as usize & 0xFF).min(INLINE)))
    }

    /// From an entry's bytes before its sequence number: the completion, and the payload
    /// when it travelled in the entry.
    pub fn decode(b: &[u8; SEQ]) -> (Completion, Option<&[u8]>) {
        let (c, n) = Completion::from_words([u64_at_ne(b, 0), u64_at_ne(b, 8)]);
        (c, n.map(|n| &b[INLINE_AT..INLINE_AT + n]))
    }
}

/// A region slot of a NIC table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slot {
    /// The first address.
    pub base: u64,
    /// Bytes.
    pub len: u64,
    /// The protection tag's id.
    pub ptag: u64,
    /// The memory handle.
    pub handle: u32,
    /// `SLOT_*` flags.
    pub flags: u32,
    /// (segment id, offset in it, first address, bytes) of each piece.
    pub pieces: Vec<(u32, u64, u64, u64)>,
}

impl Slot {
    /// Its bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; SLOT];
        b[0..8].copy_from_slice(&self.base.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.ptag.to_le_bytes());
        b[24..28].copy_from_slice(&self.handle.to_le_bytes());
        let flags = self.flags | ((self.pieces.len().min(MAX_PIECES) as u32) << 8);
        b[28..32].copy_from_slice(&flags.to_le_bytes());
        for (i, (seg, off, addr, len)) in self.pieces.iter().take(MAX_PIECES).enumerate() {
            let o = 32 + i * 32;
            b[o..o + 4].copy_from_slice(&seg.to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&off.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&addr.to_le_bytes());
            b[o + 24..o + 32].copy_from_slice(&len.to_le_bytes());
        }
        b
    }

    /// From its bytes.
    pub fn decode(b: &[u8]) -> Slot {
        let f = FixedSlot::decode(b);
        Slot {
            base: f.base,
            len: f.len,
            ptag: f.ptag,
            handle: f.handle,
            flags: f.flags,
            pieces: f.pieces().to_vec(),
        }
    }
}

/// A [`Slot`] decoded without allocating (its pieces inline): what the data path reads
/// for every RDMA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FixedSlot {
    /// The first address.
    pub base: u64,
    /// Bytes.
    pub len: u64,
    /// The protection tag's id.
    pub ptag: u64,
    /// The memory handle.
    pub handle: u32,
    /// `SLOT_*` flags.
    pub flags: u32,
    count: usize,
    pieces: [(u32, u64, u64, u64); MAX_PIECES],
}

impl FixedSlot {
    /// From a slot's bytes (at least [`SLOT`] of them; fewer decode as far as they go).
    pub fn decode(b: &[u8]) -> FixedSlot {
        let word = |o: usize| if o + 8 <= b.len() { u64_at(b, o) } else { 0 };
        let half = |o: usize| if o + 4 <= b.len() { u32_at(b, o) } else { 0 };
        let flags = half(28);
        let count = ((flags >> 8) as usize).min(MAX_PIECES).min(b.len().saturating_sub(32) / 32);
        let mut pieces = [(0, 0, 0, 0); MAX_PIECES];
        for (i, p) in pieces.iter_mut().take(count).enumerate() {
            let o = 32 + i * 32;
            *p = (half(o), word(o + 8), word(o + 16), word(o + 24));
        }
        FixedSlot {
            base: word(0),
            len: word(8),
            ptag: word(16),
            handle: half(24),
            flags: flags & 0xFF,
            count,
            pieces,
        }
    }

    /// (segment id, offset in it, first address, bytes) of each piece.
    pub fn pieces(&self) -> &[(u32, u64, u64, u64)] {
        &self.pieces[..self.count]
    }
}

/// Where the buffers of one receive of the peer lie, as the sender noted them when it
/// learned the receive (`crate::scatter`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Head {
    /// The receive's number + 1 (0: none noted).
    pub(crate) k: u64,
    /// The connection it was learned under.
    pub(crate) conn: u32,
    /// Chunks of the entry.
    pub(crate) chunks: u32,
    /// Its first chunk.
    pub(crate) first: Chunk,
}

#[cfg(test)]
mod tests;
