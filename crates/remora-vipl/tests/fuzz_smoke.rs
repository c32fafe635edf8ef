//! The `vipl_layout` fuzz body over its committed seeds (`fuzz/seeds/vipl_layout/`) and
//! mutations of them, on the stable toolchain: a decoder change that panics on bytes another
//! process may write fails here, before any long fuzzing run.

use remora_vipl::fuzzing::vipl_layout;
use remora_vipl::layout::{encode_entry, Chunk, Completion, DataSegment, Descriptor, ENTRY};

fn seeds() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/vipl_layout");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| std::fs::read(e.ok()?.path()).ok()).collect())
        .unwrap_or_default();
    out.extend(made());
    out
}

/// Seeds as the encoders make them now.
fn made() -> Vec<Vec<u8>> {
    let seg = DataSegment { addr: 0x1000, handle: 3, len: 64 };
    let d = Descriptor { control: 1, immediate: 7, length: 64, status: 0, segments: vec![seg, seg] };
    let mut entry = [0u8; ENTRY];
    let chunks = [Chunk { seg: 9, len: 4096, off: 0 }, Chunk { seg: 10, len: 100, off: 8192 }];
    encode_entry(4196, 3, &chunks, &mut entry);
    let done = Completion { len: 5, immediate: 1, status: 1 }.encode(Some(b"hello"));
    vec![d.encode(), entry.to_vec(), done.to_vec(), vec![0xff; 700], Vec::new()]
}

#[test]
fn the_layout_decoders_survive_their_seeds_and_mutations() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for seed in seeds() {
        vipl_layout(&seed);
        for _ in 0..2000 {
            let mut m = seed.clone();
            match next() % 3 {
                0 if !m.is_empty() => {
                    let i = next() as usize % m.len();
                    m[i] ^= 1 << (next() % 8);
                }
                1 => m.truncate(next() as usize % (m.len() + 1)),
                _ => m.extend((0..next() % 64).map(|_| next() as u8)),
            }
            vipl_layout(&m);
        }
    }
}

/// Rewrites `fuzz/seeds/vipl_layout/` from the encoders (run after a layout change).
#[test]
#[ignore = "a tool, not a check: rewrites the committed seed files"]
fn write_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/vipl_layout");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in made().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
    }
}
