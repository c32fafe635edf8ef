//! A channel's watch across hosts (`RemoteSegment::channel`): the home wakes futex sleepers
//! of the watched word after a store touching it, and those of the segment's first word
//! likewise (VIPL: a receiver sleeps on its done count, a sender short of receives on its
//! peer's posted count, issue 15); a store of part of the word wakes them too.

mod common;
use common::{available as segment, word, Sci as _};

use remora_sisci::*;
use std::time::{Duration, Instant};

/// How long a sleeper waits at most: a wake missed shows as a sleep this long.
const SLEEP: Duration = Duration::from_secs(20);

/// A thread sleeping on the word at `off` of node 4's segment (seen 0) returns after node
/// 8's channel, watching the done count's offset 64, stores `bytes` there (their value 1,
/// little-endian): woken, not timed out.
fn woken_after_a_store_at(off: usize, bytes: &[u8]) {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let (a, b) = (Descriptor::open(&h.sci(4)).unwrap(), Descriptor::open(&h.sci(8)).unwrap());
    let (_s, home) = segment(&a, 31, 4096);
    let mem = home.local_mapping().expect("a map of this host's memory");
    let r = RemoteSegment::connect(&b, 4, 31, 0, Some(Duration::from_secs(10))).unwrap();
    let chan = RemoteSegment::channel(&[&r], Some((0, 64))).unwrap();
    let sleeper = std::thread::spawn(move || {
        let t = Instant::now();
        remora_sys::sync::futex_wait(mem.atomic_u32(off).unwrap(), 0, Some(SLEEP));
        t.elapsed()
    });
    // The sleeper sleeps by then (were it not, it would find the word moved and return at
    // once: the test could only pass wrongly, never fail wrongly).
    std::thread::sleep(Duration::from_millis(300));
    {
        let mut g = chan.lock();
        g.push(0, off as u64, bytes).unwrap();
        g.send(false).unwrap();
    }
    let slept = sleeper.join().unwrap();
    assert_eq!(word(&home, off), 1, "the store landed");
    assert!(slept < SLEEP / 2, "the sleeper on word {off} was not woken (slept {slept:?})");
}

#[test]
fn the_watched_word_is_woken_after_a_store() {
    woken_after_a_store_at(64, &1u64.to_le_bytes());
}

#[test]
fn the_first_word_is_woken_after_a_store_too() {
    woken_after_a_store_at(0, &1u64.to_le_bytes());
}

#[test]
fn a_store_of_part_of_a_word_wakes_its_sleepers() {
    woken_after_a_store_at(0, &1u16.to_le_bytes());
    woken_after_a_store_at(64, &1u16.to_le_bytes());
}
