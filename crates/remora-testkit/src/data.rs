//! Test data: patterns every byte of which a test can check, and a checksum.

/// `n` pseudo-random bytes from `seed` (xorshift): the same seed gives the same bytes.
pub fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// FNV-1a of `b`.
pub fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x100_0000_01b3))
}

/// `n` pages of page-aligned memory (4 KiB pages) that live for the rest of the test
/// process: what the APIs' export and registration calls take.
pub fn leaked_pages(n: usize) -> &'static mut [u8] {
    const PAGE: usize = 4096;
    let mem: &'static mut [u8] = Box::leak(vec![0u8; (n + 1) * PAGE].into_boxed_slice());
    let skip = (PAGE - mem.as_ptr() as usize % PAGE) % PAGE;
    &mut mem[skip..skip + n * PAGE]
}
