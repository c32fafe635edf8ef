//! Tests of the shared layouts: the descriptor's C layout, entries, slots, completions and tagged words.

use super::*;

#[test]
fn a_descriptor_has_the_c_layout() {
    let d = Descriptor {
        control: control::OP_RDMAWRITE | control::IMMEDIATE,
        immediate: 0xdead_beef,
        length: 4096,
        status: 0,
        segments: vec![
            DataSegment { addr: 0x1000, handle: 7, len: 0 },
            DataSegment { addr: 0x2000, handle: 8, len: 4096 },
        ],
    };
    let b = d.encode();
    assert_eq!(b.len(), 64, "VIP_DESCRIPTOR with two segments is 64 bytes");
    assert_eq!(u16_at(&b, 12), 2);
    assert_eq!(u32_at(&b, 20), 0xdead_beef);
    assert_eq!(Descriptor::decode(&b).unwrap(), d);
    assert!(Descriptor::decode(&b[..40]).is_err());
}

#[test]
fn entries_slots_and_completions_round_trip() {
    let chunks = vec![Chunk { seg: 3, len: 100, off: 4096 }, Chunk { seg: 9, len: 7, off: 0 }];
    let mut e = [0u8; ENTRY];
    assert_eq!(encode_entry(107, 5, &chunks, &mut e), 48);
    let mut out = [Chunk { seg: 0, len: 0, off: 0 }; MAX_CHUNKS];
    assert_eq!(decode_entry(&e[..48], &mut out), (107, &chunks[..]));
    let mut head = [0u8; 16];
    head.copy_from_slice(&e[..16]);
    assert_eq!((entry_chunks(&head), entry_conn(&head)), (2, 5));
    let s = Slot {
        base: 1,
        len: 2,
        ptag: 3,
        handle: 4,
        flags: SLOT_VALID | SLOT_RDMA_READ,
        pieces: vec![(5, 6, 7, 8)],
    };
    assert_eq!(Slot::decode(&s.encode()), s);
    let c = Completion { len: 5, immediate: 6, status: status::DONE | status::OP_RECEIVE };
    assert_eq!(Completion::decode(&c.encode(None)), (c, None));
    let b = c.encode(Some(b"hello"));
    assert_eq!(Completion::decode(&b), (c, Some(&b"hello"[..])));
    assert!(RING_B + ENTRIES * COMPLETION <= vi_segment_size());
    assert_eq!(completion_at(ENTRIES as u64 + 1), RING_B + COMPLETION);
    assert_eq!(RING_B % 64, 0, "ring B entries are whole cache lines");
}

#[test]
fn a_tagged_word_is_heard_only_by_its_connection() {
    let w = tagged(7, 5);
    assert_eq!((untagged(7, w), untagged(6, w), untagged(8, 0)), (Some(5), None, Some(0)));
    assert_eq!(untagged(7, tagged(7, 0)), Some(0));
    // Counts widen to the one near the reader's, across a wrap of the low half.
    assert_eq!(count_in(7, tagged(7, 5), 3), 5);
    assert_eq!(count_in(7, tagged(7, 2), 3), 2);
    assert_eq!(count_in(6, tagged(7, 5), 3), 0, "another connection's count");
    assert_eq!(count_in(7, tagged(7, 1 << 32), (1 << 32) - 2), 1 << 32);
    assert_eq!(count_in(7, tagged(7, (1 << 32) + 3), 1 << 32), (1 << 32) + 3);
    assert_eq!(count_in(7, tagged(7, u64::from(u32::MAX)), 0), 0, "never below zero");
    // A sequence number of an older connection is never the one expected.
    assert_ne!(tagged(1, 1), tagged(2, 1));
    assert_ne!(tagged(2, 0), 0, "a tagged zero is not the zeroed segment");
}
