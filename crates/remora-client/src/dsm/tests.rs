//! Unit tests of the DSM pager's pure parts.

use super::diff;

#[test]
fn diff_finds_and_merges_runs() {
    let a = vec![0u8; 100];
    let mut b = a.clone();
    b[3] = 1;
    b[10] = 1;
    b[50] = 2;
    b[51] = 2;
    assert_eq!(diff(&a, &b), vec![(3, 11), (50, 52)]);
    assert!(diff(&a, &a).is_empty());
}

/// The byte-by-byte walk `diff` replaced: every byte compared, runs merged across gaps under
/// 16 bytes.
fn diff_bytewise(twin: &[u8], now: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < now.len() {
        if twin[i] == now[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < now.len() && twin[i] != now[i] {
            i += 1;
        }
        match runs.last_mut() {
            Some(last) if start - last.1 < 16 => last.1 = i,
            _ => runs.push((start, i)),
        }
    }
    runs
}

/// `diff`, which skips equal stretches many bytes at a time, finds exactly the runs a walk
/// of every byte finds: changes at and across the stride's edges, at the page's ends, runs
/// merged across short gaps and not across long ones, pages of odd lengths, and random
/// pages with a few or many bytes changed.
#[test]
fn diff_skipping_equal_stretches_finds_the_runs_a_bytewise_walk_finds() {
    let page = vec![7u8; 4096];
    let mut cases: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for at in [0usize, 1, 63, 64, 65, 127, 128, 200, 4032, 4095] {
        let mut b = page.clone();
        b[at] ^= 1;
        cases.push((page.clone(), b));
    }
    // A run across a stride edge, two runs 15 and 16 bytes apart, the whole page.
    let mut b = page.clone();
    b[60..70].fill(0);
    b[85] = 0;
    b[1000] = 0;
    b[1016] = 0;
    cases.push((page.clone(), b));
    cases.push((page.clone(), vec![8u8; 4096]));
    // Lengths that are not a multiple of the stride.
    for len in [0usize, 1, 5, 63, 65, 130] {
        let a = vec![1u8; len];
        let mut b = a.clone();
        if len > 0 {
            b[len - 1] = 2;
        }
        cases.push((a, b));
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..300 {
        let mut b = page.clone();
        for _ in 0..(1 + round % 40) {
            let at = (next() % 4096) as usize;
            let n = 1 + (next() % 24) as usize;
            for byte in &mut b[at..(at + n).min(4096)] {
                *byte = (next() % 256) as u8;
            }
        }
        cases.push((page.clone(), b));
    }
    for (a, b) in &cases {
        assert_eq!(diff(a, b), diff_bytewise(a, b), "pages of {} bytes", a.len());
    }
}
