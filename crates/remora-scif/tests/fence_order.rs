//! A fence covers every RMA started before its mark, whatever order the RMAs finish in:
//! a small RMA started after the mark that finishes first must not let the fence pass
//! while a big one started before it still copies (`SCIF_FENCE_INIT_SELF` and
//! `SCIF_FENCE_INIT_PEER`, `scif_fence_wait` and `scif_fence_signal`).

mod common;
use common::*;
use remora_scif::*;
use remora_testkit::Harness;
use std::time::Duration;

const BIG: usize = 96 << 20;
const PG: usize = 4096;

/// Page-aligned, private anonymous memory that lives for the rest of the test process.
fn anon(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + PG].into_boxed_slice());
    let start = (PG - (v.as_ptr() as usize % PG)) % PG;
    UserRegion::from_static(&mut v[start..start + len])
}

fn byte_at(r: &UserRegion, off: usize) -> u8 {
    let mut b = [0u8; 1];
    r.read(off, &mut b).unwrap();
    b[0]
}

/// How the fence is taken and passed in one round.
#[derive(Clone, Copy, Debug)]
enum Fence {
    /// The writer marks its own RMAs and waits.
    SelfWait,
    /// The other end marks the writer's RMAs (`INIT_PEER`) and waits.
    PeerWait,
    /// The writer's `fence_signal` (`INIT_SELF`) stores a value into its own window.
    SelfSignal,
}

#[test]
fn a_fence_waits_for_an_earlier_rma_a_later_one_overtook() {
    let h = Harness::new();
    let (c, s) = pair(&h, 8, 4);
    let csrc = anon(BIG + PG);
    let sdst = anon(BIG + PG);
    let coff = c.register(csrc, 0, Prot::RW, true).unwrap();
    let soff = s.register(sdst, 0, Prot::RW, true).unwrap();
    let mut in_flight = 0;
    for round in 0..9u8 {
        let fence = [Fence::SelfWait, Fence::PeerWait, Fence::SelfSignal][round as usize % 3];
        let v = round + 1;
        csrc.write(0, &vec![v; BIG]).unwrap();
        let c2 = c.clone();
        let big = std::thread::spawn(move || c2.write_to(coff, BIG, soff, RmaFlags::default()).unwrap());
        // Until the big copy has begun: a byte near either end holds this round's value
        // (glibc's memmove copies a large range forward or backward, whichever avoids
        // aliasing of the two ranges' page offsets, and keeps its first and last bytes in
        // registers until the end: neither end's own byte says where it stands).
        let probes = [PG, BIG / 2, BIG - PG - 1];
        let done = |k: usize| byte_at(&sdst, probes[k]) == v;
        while !done(0) && !done(2) {
            std::thread::sleep(Duration::from_micros(200));
        }
        let flag = BIG as u64 + 64;
        let mark = match fence {
            Fence::PeerWait => s.fence_mark(FenceInit::Peer).unwrap(),
            _ => c.fence_mark(FenceInit::SelfInit).unwrap(),
        };
        let copying = !(0..probes.len()).all(done);
        // A small RMA after the mark: it finishes long before the big one.
        c.write_to(coff + BIG as u64, PG, soff + BIG as u64, RmaFlags::default()).unwrap();
        match fence {
            Fence::SelfWait => c.fence_wait(mark).unwrap(),
            Fence::PeerWait => s.fence_wait(mark).unwrap(),
            Fence::SelfSignal => {
                c.fence_signal(Some((coff + flag, v as u64)), None, FenceInit::SelfInit).unwrap();
                let mut b = [0u8; 8];
                csrc.read(flag as usize, &mut b).unwrap();
                assert_eq!(u64::from_ne_bytes(b), v as u64, "the signal was stored");
            }
        }
        let all_home = (0..probes.len()).all(done) && byte_at(&sdst, 0) == v && byte_at(&sdst, BIG - 1) == v;
        big.join().unwrap();
        if copying {
            in_flight += 1;
            assert!(
                all_home,
                "round {round} ({fence:?}): the fence passed while the earlier RMA still copied"
            );
        }
    }
    assert!(in_flight >= 3, "the big RMA was still copying at the mark in {in_flight} of 9 rounds");
}

/// The peer on another host (nodes joined over TCP): `SCIF_FENCE_INIT_PEER` marks and waits
/// for the RMAs the far process started, which stream into our windows through its node.
#[test]
fn a_peer_fence_across_hosts_waits_for_the_far_peers_rma() {
    const FAR: usize = 32 << 20;
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 8, 4);
    let csrc = anon(FAR);
    let sdst = anon(FAR + PG);
    let coff = c.register(csrc, 0, Prot::RW, true).unwrap();
    let soff = s.register(sdst, 0, Prot::RW, true).unwrap();
    let flag = FAR as u64;
    let mut in_flight = 0;
    for round in 0..4u8 {
        let v = round + 1;
        csrc.write(0, &vec![v; FAR]).unwrap();
        let c2 = c.clone();
        let big = std::thread::spawn(move || c2.write_to(coff, FAR, soff, RmaFlags::default()).unwrap());
        while byte_at(&sdst, 0) != v {
            std::thread::sleep(Duration::from_micros(200));
        }
        let copying = byte_at(&sdst, FAR - 1) != v;
        if round % 2 == 0 {
            let mark = s.fence_mark(FenceInit::Peer).unwrap();
            s.fence_wait(mark).unwrap();
        } else {
            s.fence_signal(Some((soff + flag, v as u64)), None, FenceInit::Peer).unwrap();
        }
        let last = byte_at(&sdst, FAR - 1);
        big.join().unwrap();
        if copying {
            in_flight += 1;
            assert_eq!(
                last, v,
                "round {round}: the peer fence passed while the far peer's RMA still streamed"
            );
        }
    }
    assert!(in_flight >= 2, "the far RMA was still streaming at the mark in {in_flight} of 4 rounds");
    // Marks of the far peer's RMAs stay marks: one never handed out is refused.
    let mark = s.fence_mark(FenceInit::Peer).unwrap();
    s.fence_wait(mark).unwrap();
    assert!(matches!(s.fence_wait(mark + 2000), Err(Error::Invalid(_))), "a mark never handed out");
}
