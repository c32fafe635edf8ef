//! Fuzz bodies for the VIPL layouts that another process writes and this one reads: the
//! descriptors a program builds in its registered memory, the peer's receive-ring entries,
//! completions and registration slots in a VI's shared segment, and the VI description a
//! peer sends when connecting. The cargo-fuzz target `vipl_layout` (`fuzz/`) and the stable
//! smoke test `tests/fuzz_smoke.rs` drive [`vipl_layout`].
//!
//! ```
//! remora_vipl::fuzzing::vipl_layout(&[0xff; 600]);
//! ```

use crate::layout::{
    count_in, decode_entry, encode_entry, entry_conn, tagged, untagged, Chunk, Completion, Descriptor, Slot,
    ENTRY, INLINE, MAX_CHUNKS, SEQ, SLOT,
};
use crate::link::PeerInfo;

/// The first `N` bytes of `data` at `at`, zero-padded.
fn window<const N: usize>(data: &[u8], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    let src = data.get(at..).unwrap_or_default();
    let n = src.len().min(N);
    b[..n].copy_from_slice(&src[..n]);
    b
}

/// Decode `data` as each layout; nothing may panic, and whatever decodes must encode back to
/// bytes that decode to the same value.
pub fn vipl_layout(data: &[u8]) {
    if let Ok(d) = Descriptor::decode(data) {
        assert_eq!(Descriptor::decode(&d.encode()).ok().as_ref(), Some(&d), "descriptor round trip");
    }
    let entry: [u8; ENTRY] = window(data, 0);
    let mut out = [Chunk::default(); MAX_CHUNKS];
    let (total, chunks) = decode_entry(&entry, &mut out);
    assert!(chunks.len() <= MAX_CHUNKS);
    let chunks = chunks.to_vec();
    let head = window::<16>(&entry, 0);
    let conn = entry_conn(&head);
    let mut again = [0u8; ENTRY];
    encode_entry(total, conn, &chunks, &mut again);
    let mut out2 = [Chunk::default(); MAX_CHUNKS];
    let (total2, chunks2) = decode_entry(&again, &mut out2);
    assert_eq!((total2, chunks2), (total, chunks.as_slice()), "ring entry round trip");
    assert_eq!(entry_conn(&window::<16>(&again, 0)), conn, "ring entry's connection number");
    // A word of the segment (a count, a flag, a sequence number) as another process stored
    // it: heard only under its own connection number, and a count widens near any count.
    let w = u64::from_le_bytes(window::<8>(data, 3));
    let (conn, near) = ((w >> 32) as u32, u64::from_le_bytes(window::<8>(data, 11)));
    if w != 0 {
        assert_eq!(untagged(conn, w), Some(w as u32), "a word heard under its number");
        assert_eq!(untagged(conn.wrapping_add(1), w), None, "and under no other");
        assert_eq!(tagged(conn, u64::from(w as u32)), w, "word round trip");
    }
    let n = count_in(conn, w, near);
    if n != 0 {
        assert_eq!(n as u32, w as u32, "a count keeps its low half");
        assert!(n.abs_diff(near) <= 1 << 31, "a count near the reader's");
    }
    let seq: [u8; SEQ] = window(data, 1);
    let (c, inline) = Completion::decode(&seq);
    assert!(inline.is_none_or(|i| i.len() <= INLINE), "an inline payload within its room");
    let bytes = c.encode(inline);
    assert_eq!(Completion::decode(&bytes), (c, inline), "completion round trip");
    let slot = Slot::decode(&window::<SLOT>(data, 2));
    assert_eq!(Slot::decode(&slot.encode()), slot, "slot round trip");
    if let Ok(p) = PeerInfo::decode(data) {
        assert_eq!(PeerInfo::decode(&p.encode()).ok(), Some(p), "VI description round trip");
    }
}
