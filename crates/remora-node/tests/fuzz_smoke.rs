//! The smoke run of every fuzz target, on stable and in `cargo test`: each target's body
//! (`remora_node::fuzzing`) on its committed seeds (`fuzz/seeds/<target>/`, regression
//! inputs of crashes found included), on the seeds as the code makes them now, and on a
//! few thousand mutations of them with a fixed seed. The long runs use cargo-fuzz
//! (`fuzz/README.md`).

use remora_node::fuzzing::{seeds, TARGETS};
use std::path::PathBuf;
use std::time::Instant;

/// Mutations per target.
const MUTATIONS: usize = 3000;

fn seeds_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds").join(target)
}

/// The committed seeds of a target.
fn committed(target: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(dir) = std::fs::read_dir(seeds_dir(target)) else { return Vec::new() };
    let mut out: Vec<(String, Vec<u8>)> = dir
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).ok()?)))
        .collect();
    out.sort();
    out
}

/// xorshift64*: fixed seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `base` (spliced with `other` sometimes), as libFuzzer's simplest ones.
fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        let i = at.min(v.len().saturating_sub(1));
        match rng.below(8) {
            0 if !v.is_empty() => v[i] ^= 1 << rng.below(8),
            1 if !v.is_empty() => v[i] = rng.next() as u8,
            2 => v.insert(at, rng.next() as u8),
            3 if at < v.len() => {
                v.remove(at);
            }
            4 => v.truncate(at),
            5 if !v.is_empty() => {
                let magic = [0u8, 0xff, 0x7f, 0x80, 1, 0xfe][rng.below(6)];
                let n = 1 + rng.below(8);
                for b in v.iter_mut().skip(at).take(n) {
                    *b = magic;
                }
            }
            6 => {
                let from = rng.below(other.len() + 1);
                let n = rng.below(other.len() - from + 1).min(64);
                v.splice(at..at, other[from..from + n].iter().copied());
            }
            _ => v.extend((0..rng.below(16)).map(|_| rng.next() as u8)),
        }
    }
    v
}

fn run(target: &str, body: fn(&[u8]), name: &str, input: &[u8]) {
    if std::panic::catch_unwind(|| body(input)).is_err() {
        let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
        panic!("fuzz target {target} panicked on {name}: {hex}");
    }
}

#[test]
fn every_target_survives_its_seeds_and_their_mutations() {
    let all = Instant::now();
    for (i, (target, body)) in TARGETS.iter().enumerate() {
        let t = Instant::now();
        let mut corpus = committed(target);
        let stored = corpus.len();
        corpus.extend(seeds(target));
        assert!(corpus.len() > stored, "{target} has seeds");
        for (name, input) in &corpus {
            run(target, *body, name, input);
        }
        let mut rng = Rng(0x5eed_0000 + i as u64);
        for k in 0..MUTATIONS {
            let base = &corpus[rng.below(corpus.len())].1;
            let other = &corpus[rng.below(corpus.len())].1;
            let input = if k % 16 == 0 {
                (0..rng.below(256)).map(|_| rng.next() as u8).collect()
            } else {
                mutate(&mut rng, base, other)
            };
            run(target, *body, &format!("mutation {k}"), &input);
        }
        eprintln!(
            "{target}: {} seeds ({stored} committed), {MUTATIONS} mutations, {:?}",
            corpus.len(),
            t.elapsed()
        );
    }
    eprintln!("all targets: {:?}", all.elapsed());
}

/// Write the seeds the code makes into `fuzz/seeds/<target>/` (run by hand after a wire
/// change: `cargo test -p remora-node --test fuzz_smoke -- --ignored write_seeds`).
#[test]
#[ignore]
fn write_seeds() {
    for (target, _) in TARGETS {
        let dir = seeds_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds(target) {
            std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
        }
    }
}
